package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// TestEveryInsertWakesTheWorkers: each accepted event's job insert sends
// River's insert notification, so that an idle worker fetches it at once
// rather than at its next poll. River rate-limits these per inserting
// client by its FetchCooldown, 100 ms unless set: three events accepted
// back to back would then wake the workers once.
func TestEveryInsertWakesTheWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	conn, err := pgx.Connect(ctx, b.db.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `LISTEN "public.river_insert"`)
	require.NoError(t, err)

	// invoice.paid goes to two routes, each with a queue of its own; River
	// notifies per queue.
	const events = 3
	for i := range events {
		require.Equal(t, accepted, b.post(t, signStripe(stripeEvent(fmt.Sprintf("evt_wake_%d", i), "invoice.paid"), stripeSecret, time.Now())).body)
	}
	woken := map[string]int{}
	for i := range 2 * events {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		require.NoError(t, err, "notification %d of %d", i+1, 2*events)
		var p struct{ Queue string }
		require.NoError(t, json.Unmarshal([]byte(n.Payload), &p))
		woken[p.Queue]++
	}
	require.Equal(t, map[string]int{claim.Queue("ship-order"): events, claim.Queue("ledger"): events}, woken)
}
