package deliver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// A claim whose payload retention cleared can still be reopened (by an
// operator's retry or a redelivery), but its delivery then fails with the
// reason; an empty body is never sent in its place.
func TestWorkAfterRetention(t *testing.T) {
	t.Parallel()

	t.Run("ReopenedClaimWithoutPayloadFailsWithoutACall", func(t *testing.T) {
		t.Parallel()
		// A database of its own: the claim must be terminal for a while
		// of the database's clock, which a rolled-back transaction stops.
		b := setupDB(t, func(n int, _ *http.Request) int {
			if n == 1 {
				return http.StatusUnprocessableEntity
			}
			return http.StatusOK
		})
		b.claimed(t, "evt_cleared", "ship")
		tx, w := b.begin(t)
		b.workEnds(t, tx, w, b.job(t, tx, "evt_cleared", "ship"))
		require.NoError(t, tx.Commit(t.Context()))
		require.Len(t, b.down.received(), 1)

		// Retention's own statement: payloads of claims terminal for over
		// a nanosecond.
		res, err := b.store.Prune(t.Context(), claim.Retention{Claims: time.Hour, Payloads: time.Nanosecond})
		require.NoError(t, err)
		require.Equal(t, claim.PruneResult{PayloadsCleared: 1}, res)
		n, err := b.store.Reopen(t.Context(), "stripe", "evt_cleared", false)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		tx, w = b.begin(t)
		jobs, err := b.client.JobListTx(t.Context(), tx, river.NewJobListParams().Kinds(claim.DeliveryKind).States("available"))
		require.NoError(t, err)
		require.Len(t, jobs.Jobs, 1, "the reopen's job")
		b.workEnds(t, tx, w, jobs.Jobs[0]) // ended, not retried

		d := delivery(t, tx, "evt_cleared", "ship")
		require.Equal(t, claim.DeliveryFailed, d.Status)
		require.Equal(t, "the event's payload was cleared by retention before it was delivered", d.LastError)
		require.Equal(t, 1, d.AttemptCount, "no attempt was made")
		require.Equal(t, claim.Failed, claimStatus(t, tx, "evt_cleared"))
		require.Len(t, b.down.received(), 1, "nothing was sent")
	})

	// An empty body is a payload like any other: only a cleared one (NULL)
	// stops a delivery.
	t.Run("EmptyPayloadIsDelivered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, status(http.StatusOK))
		_, err := testfactory.ClaimEvent(t.Context(), b.store, claim.Event{Provider: "stripe", ID: "evt_empty", Type: "ping", Payload: []byte{}},
			[]string{"ship"}, true)
		require.NoError(t, err)
		tx, w := b.begin(t)
		b.workEnds(t, tx, w, b.job(t, tx, "evt_empty", "ship"))
		require.Equal(t, claim.DeliveryCompleted, delivery(t, tx, "evt_empty", "ship").Status)
		reqs := b.down.received()
		require.Len(t, reqs, 1)
		require.Empty(t, reqs[0].body)
	})
}
