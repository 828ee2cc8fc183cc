package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// labLease is how long designs 3 and 4 hold a claim before a later delivery
// of the event may take it over.
const labLease = 2 * time.Second

// leaseDesign is design 3 (keyed false) and design 4 (keyed true): an atomic
// claim with a lease. A delivery that finds the event claimed and its lease
// running is asked to retry later (409); one that finds the lease expired
// takes the claim over and runs the effect, which recovers a claim whose
// process died. Without a downstream key, the takeover after a crash that
// followed the effect performs it twice; with the key derived from the event
// id, the downstream answers the repeat without a second effect.
type leaseDesign struct {
	designTable
	call  *labCaller
	lease time.Duration
	keyed bool
}

// leaseColumns are the columns of designs 3's and 4's tables: the claim,
// its lease (whose holder's token), and how many deliveries took it.
const leaseColumns = `	event_id     text PRIMARY KEY,
	status       text NOT NULL,
	token        text NOT NULL,
	locked_until timestamptz NOT NULL,
	claims       integer NOT NULL DEFAULT 1`

func (d *leaseDesign) handle(ctx context.Context, eventID string, body []byte) int {
	token := devlocal.RandomHex(16)
	// Claim the event, or take over a claim whose lease ran out.
	var claims int
	err := d.db.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %[1]s AS t (event_id, status, token, locked_until)
VALUES ($1, 'processing', $2, now() + make_interval(secs => $3))
ON CONFLICT (event_id) DO UPDATE SET token = EXCLUDED.token, locked_until = EXCLUDED.locked_until, claims = t.claims + 1
WHERE t.status = 'processing' AND t.locked_until < now()
RETURNING claims`, d.table), eventID, token, d.lease.Seconds()).Scan(&claims)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var status string
		if err := d.db.QueryRow(ctx, fmt.Sprintf(`SELECT status FROM %s WHERE event_id = $1`, d.table), eventID).Scan(&status); err != nil {
			return http.StatusInternalServerError
		}
		if status == "done" {
			return http.StatusOK
		}
		return http.StatusConflict // claimed, lease running: retry later
	case err != nil:
		return http.StatusInternalServerError
	}

	key := ""
	if d.keyed {
		key = "lab:" + eventID // the same for every delivery of the event
	}
	if err := d.call.effect(ctx, body, key); err != nil {
		// Give the claim up, so that the provider's next retry may run it.
		_, _ = d.db.Exec(ctx, fmt.Sprintf(`UPDATE %s SET locked_until = now() WHERE event_id = $1 AND token = $2`, d.table), eventID, token)
		return http.StatusServiceUnavailable
	}
	if _, err := d.db.Exec(ctx, fmt.Sprintf(`UPDATE %s SET status = 'done' WHERE event_id = $1 AND token = $2`, d.table), eventID, token); err != nil {
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

func (d *leaseDesign) record(ctx context.Context, eventID string) (claimed, completed bool, err error) {
	return statusRecord(ctx, d.db, d.table, eventID)
}
