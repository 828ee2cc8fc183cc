package lab

import (
	"context"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seenDesign is design 2, a "seen flag": an atomic claim (INSERT … ON
// CONFLICT DO NOTHING RETURNING) decides which delivery runs the effect,
// and every later delivery is acknowledged. Copies never duplicate, but a
// claim whose process dies before the effect is never run again: the retry
// finds the flag and is acknowledged.
type seenDesign struct {
	designTable
	call *labCaller
}

// seenColumns are lab_seen's: a row is the flag, its status "done" once the
// effect ran.
const seenColumns = `	event_id   text PRIMARY KEY,
	status     text NOT NULL,
	claimed_at timestamptz NOT NULL DEFAULT now()`

func (d *seenDesign) handle(ctx context.Context, eventID string, body []byte) int {
	var won string
	err := d.db.QueryRow(ctx, `INSERT INTO lab_seen (event_id, status) VALUES ($1, 'processing')
ON CONFLICT (event_id) DO NOTHING RETURNING event_id`, eventID).Scan(&won)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return http.StatusOK // seen before, whatever became of it
	case err != nil:
		return http.StatusInternalServerError
	}
	if err := d.call.effect(ctx, body, ""); err != nil {
		// The flag stays: no delivery of this event will try again.
		return http.StatusBadGateway
	}
	if _, err := d.db.Exec(ctx, `UPDATE lab_seen SET status = 'done' WHERE event_id = $1`, eventID); err != nil {
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

func (d *seenDesign) record(ctx context.Context, eventID string) (claimed, completed bool, err error) {
	return statusRecord(ctx, d.db, d.table, eventID)
}

// statusRecord reads a status column: a row claims the event, and "done"
// completes it.
func statusRecord(ctx context.Context, db *pgxpool.Pool, table, eventID string) (claimed, completed bool, err error) {
	var status string
	err = db.QueryRow(ctx, `SELECT status FROM `+table+` WHERE event_id = $1`, eventID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, status == "done", err
}
