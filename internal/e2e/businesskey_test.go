package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// TestBusinessKey runs the business-key promises through both binaries:
// ship and ledger dedupe on a business key, mail (a sibling of ship) does
// not. Its subtests share the stack and run in order, each on objects of
// its own.
func TestBusinessKey(t *testing.T) {
	t.Parallel()
	s := newStack(t, []route{
		{name: "ship", events: []string{"order.*"}, businessKey: []string{"type", "json:data.id"}},
		{name: "mail", events: []string{"order.*"}},
		{name: "ledger", events: []string{"refund.*"}, businessKey: []string{"json:data.id"}},
	})
	// The ledger refuses a key's first call (a permanent 422) and takes the next.
	s.down.set("ledger", answers(http.StatusUnprocessableEntity, http.StatusOK))
	ingest, _ := s.ingest(), s.worker()

	t.Run("SameObjectDifferentEventTypesAreTwoEffects", func(t *testing.T) {
		paid := event{id: "evt_bk_paid", typ: "order.paid", object: "ord_1"}
		shipped := event{id: "evt_bk_shipped", typ: "order.shipped", object: "ord_1"}
		s.claimed(ingest, paid)
		s.claimed(ingest, shipped)
		_, ds := s.waitStatus(paid.id, claim.Completed, settle)
		require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "ship").Status)
		_, ds = s.waitStatus(shipped.id, claim.Completed, settle)
		require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "ship").Status)
		require.Equal(t, 1, s.down.effectsOf(key(paid.id, "ship")))
		require.Equal(t, 1, s.down.effectsOf(key(shipped.id, "ship")), "the type is part of the key: not collapsed")
	})

	t.Run("SameObjectSameTypeIsOneEffectAndTheSiblingStillDelivers", func(t *testing.T) {
		first := event{id: "evt_bk_first", typ: "order.paid", object: "ord_2"}
		second := event{id: "evt_bk_second", typ: "order.paid", object: "ord_2"}
		before := s.businessDuplicates(ingest, "ship")
		s.claimed(ingest, first)
		s.claimed(ingest, second)
		s.waitStatus(first.id, claim.Completed, settle)
		c, ds := s.waitStatus(second.id, claim.Completed, settle)
		require.Empty(t, c.LastError)

		ship := deliveryOf(t, ds, "ship")
		require.Equal(t, claim.DeliverySkipped, ship.Status)
		require.Equal(t, "business key is held by sw/evt_bk_first", ship.LastError)
		require.Zero(t, ship.AttemptCount)
		require.Equal(t, 1, s.down.effectsOf(key(first.id, "ship")))
		require.Empty(t, s.down.callsFor(key(second.id, "ship")), "no downstream call for a skipped delivery")
		require.Zero(t, s.jobsOf(second.id), "mail's job's row went with its end; ship had none")
		require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "mail").Status)
		require.Equal(t, 1, s.down.effectsOf(key(second.id, "mail")), "the sibling route without a key delivers")
		require.Equal(t, before+1, s.businessDuplicates(ingest, "ship"))

		out, code := s.run("claims", "show", provider, second.id)
		require.Zero(t, code, out)
		require.Regexp(t, `(?m)^ship\s+skipped\s.*business key is held by sw/evt_bk_first$`, out)
		require.NotContains(t, out, "holds business key")
		out, code = s.run("claims", "show", provider, first.id)
		require.Zero(t, code, out)
		require.Contains(t, out, `ship holds business key ["order.paid","ord_2"]`)

		// --force re-runs the completed sibling, never the skipped delivery.
		out, code = s.run("claims", "retry", provider, second.id, "--force")
		require.Zero(t, code, out)
		require.Contains(t, out, "sw/evt_bk_second: reopened 1 delivery")
		require.Contains(t, out, "1 delivery left skipped: another claim holds the business key, and --force does not override a business key")
		_, ds = s.waitStatus(second.id, claim.Completed, settle)
		require.Equal(t, claim.DeliverySkipped, deliveryOf(t, ds, "ship").Status)
		require.Len(t, s.down.callsFor(key(second.id, "mail")), 2, "mail ran again, same key")
		require.Empty(t, s.down.callsFor(key(second.id, "ship")))
	})

	t.Run("HundredConcurrentEventsSharingAKeyAreOneEffect", func(t *testing.T) {
		const n = 100
		before := s.businessDuplicates(ingest, "ship")
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			ids[i] = fmt.Sprintf("evt_bk_race_%03d", i)
			wg.Go(func() { s.claimed(ingest, event{id: ids[i], typ: "order.paid", object: "ord_3"}) })
		}
		wg.Wait()
		for _, id := range ids {
			s.waitStatus(id, claim.Completed, settle)
		}
		effects, skipped := 0, 0
		var holder string
		for _, id := range ids {
			effects += s.down.effectsOf(key(id, "ship"))
			if s.down.effectsOf(key(id, "ship")) == 1 {
				holder = id
			}
			require.Equal(t, 1, s.down.effectsOf(key(id, "mail")), id)
		}
		require.Equal(t, 1, effects, "exactly one shipment")
		var named int
		require.NoError(t, s.db.Pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE status = 'skipped'),
       count(*) FILTER (WHERE last_error = 'business key is held by sw/' || $1)
FROM webhook_deliveries WHERE route = 'ship' AND event_id LIKE 'evt_bk_race_%'`, holder).Scan(&skipped, &named))
		require.Equal(t, n-1, skipped)
		require.Equal(t, n-1, named, "every skipped delivery names the holder")
		require.Equal(t, before+n-1, s.businessDuplicates(ingest, "ship"))
	})

	t.Run("MissingFieldFailsTheDeliveryNamingIt", func(t *testing.T) {
		e := event{id: "evt_bk_noobject", typ: "order.paid", noObject: true}
		s.claimed(ingest, e)
		c, ds := s.waitStatus(e.id, claim.Failed, settle)
		const why = "business key: json:data.id is missing from the body"
		ship := deliveryOf(t, ds, "ship")
		require.Equal(t, claim.DeliveryFailed, ship.Status)
		require.Equal(t, why, ship.LastError)
		require.Equal(t, why, c.LastError)
		require.Empty(t, s.down.callsFor(key(e.id, "ship")), "never sent without its key")
		require.Equal(t, 1, s.down.effectsOf(key(e.id, "mail")))

		out, code := s.run("claims", "list", "--status", "failed")
		require.Zero(t, code, out)
		require.Regexp(t, `(?m)^sw\s+evt_bk_noobject\s+order\.paid\s+failed\s.*`+why+`$`, out)

		out, code = s.run("claims", "retry", provider, e.id)
		require.NotZero(t, code, out)
		require.Contains(t, out, "the business key could not be computed from the event")
		_, ds = s.waitStatus(e.id, claim.Failed, settle)
		require.Equal(t, claim.DeliveryFailed, deliveryOf(t, ds, "ship").Status)
		require.Empty(t, s.down.callsFor(key(e.id, "ship")))
	})

	t.Run("FailedHolderRetriedIsDeliveredSkippedStaysSkipped", func(t *testing.T) {
		holder := event{id: "evt_bk_refund_1", typ: "refund.created", object: "re_1"}
		late := event{id: "evt_bk_refund_2", typ: "refund.created", object: "re_1"}
		s.claimed(ingest, holder)
		s.waitStatus(holder.id, claim.Failed, settle)
		s.claimed(ingest, late)
		c, ds := s.waitStatus(late.id, claim.Ignored, settle)
		require.Equal(t, "business key is held by sw/evt_bk_refund_1", c.LastError, "a failed holder keeps its key")
		require.Equal(t, claim.DeliverySkipped, deliveryOf(t, ds, "ledger").Status)
		require.Zero(t, s.jobsOf(late.id))

		for _, args := range [][]string{{"claims", "retry", provider, late.id}, {"claims", "retry", provider, late.id, "--force"}} {
			out, code := s.run(args...)
			require.NotZero(t, code, out)
			require.Contains(t, out, "--force does not override a business key", args)
		}

		out, code := s.run("claims", "retry", provider, holder.id)
		require.Zero(t, code, out)
		require.Contains(t, out, "reopened 1 delivery")
		s.waitStatus(holder.id, claim.Completed, settle)
		require.Equal(t, 1, s.down.effectsOf(key(holder.id, "ledger")))

		c, ds = s.waitStatus(late.id, claim.Ignored, settle)
		require.Equal(t, claim.DeliverySkipped, deliveryOf(t, ds, "ledger").Status)
		require.Empty(t, s.down.callsFor(key(late.id, "ledger")))
		require.Zero(t, c.AttemptCount)
	})
}

// businessDuplicates reads hookgate_business_duplicates_total{route} from
// ingest's /metrics.
func (s *stack) businessDuplicates(ingest *proc, route string) int {
	s.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, ingest.url+"/metrics", nil)
	require.NoError(s.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	series := `hookgate_business_duplicates_total{route="` + route + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(s.t, err)
			return int(n)
		}
	}
	require.NoError(s.t, sc.Err())
	s.t.Fatalf("ingest's /metrics has no %s", series)
	return 0
}
