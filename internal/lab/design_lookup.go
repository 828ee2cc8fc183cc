package lab

import (
	"context"
	"net/http"
)

// lookupDesign is design 1, the "normal lookup" of many workflows: look the
// event up, perform the side effect if it is not there, then insert it.
// Copies that look before the first one inserts all perform the effect, and
// a crash between the effect and the insert leaves nothing to find.
type lookupDesign struct {
	designTable
	call *labCaller
}

// lookupColumns are lab_lookup's: a row is an event processed.
const lookupColumns = `	event_id     text PRIMARY KEY,
	processed_at timestamptz NOT NULL DEFAULT now()`

func (d *lookupDesign) handle(ctx context.Context, eventID string, body []byte) int {
	var seen bool
	if err := d.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM lab_lookup WHERE event_id = $1)`, eventID).Scan(&seen); err != nil {
		return http.StatusInternalServerError
	}
	if seen {
		return http.StatusOK
	}
	if err := d.call.effect(ctx, body, ""); err != nil {
		return http.StatusBadGateway
	}
	// A copy that inserted first makes this fail: too late, the effect ran.
	if _, err := d.db.Exec(ctx, `INSERT INTO lab_lookup (event_id) VALUES ($1)`, eventID); err != nil {
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

func (d *lookupDesign) record(ctx context.Context, eventID string) (claimed, completed bool, err error) {
	err = d.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM lab_lookup WHERE event_id = $1)`, eventID).Scan(&claimed)
	return claimed, claimed, err
}
