package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
	"github.com/hookgate/hookgate/internal/verify"
)

// TestContractTable walks every row of the POST /webhooks/{provider} table
// against a running server and its database.
func TestContractTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	t.Run("new event: claim, one delivery and one job per matching route", func(t *testing.T) {
		r := b.post(t, signStripe(stripeEvent("evt_fanout", "invoice.paid"), stripeSecret, time.Now()))
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, accepted, r.body)
		c, ok := b.claimRow(t, "stripe", "evt_fanout")
		require.True(t, ok)
		require.Equal(t, "processing", c.Status)
		require.Equal(t, "invoice.paid", c.EventType)
		require.Equal(t, "in_evt_fanout", *c.ObjectID)
		require.Equal(t, map[string]string{"ship-order": "processing", "ledger": "processing"}, b.deliveries(t, "stripe", "evt_fanout"))
		b.requireJobs(t,
			claim.DeliveryArgs{Provider: "stripe", EventID: "evt_fanout", Route: "ship-order"},
			claim.DeliveryArgs{Provider: "stripe", EventID: "evt_fanout", Route: "ledger"})
	})

	t.Run("new event matching no route: ignored, no job", func(t *testing.T) {
		jobs := b.jobs(t)
		r := b.post(t, signStripe(stripeEvent("evt_noroute", "customer.created"), stripeSecret, time.Now()))
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, accepted, r.body)
		c, ok := b.claimRow(t, "stripe", "evt_noroute")
		require.True(t, ok)
		require.Equal(t, "ignored", c.Status)
		require.Empty(t, b.deliveries(t, "stripe", "evt_noroute"))
		require.Equal(t, jobs, b.jobs(t))
	})

	t.Run("same key again: duplicate, nothing new", func(t *testing.T) {
		for _, id := range []string{"evt_fanout", "evt_noroute"} {
			claims, jobs := b.claims(t), b.jobs(t)
			r := b.post(t, signStripe(stripeEvent(id, "invoice.paid"), stripeSecret, time.Now()))
			require.Equal(t, http.StatusOK, r.status)
			require.Equal(t, duplicate, r.body)
			require.Equal(t, claims, b.claims(t))
			require.Equal(t, jobs, b.jobs(t))
		}
	})

	t.Run("same key, completed: duplicate", func(t *testing.T) {
		b.post(t, signStripe(stripeEvent("evt_done", "checkout.session.completed"), stripeSecret, time.Now()))
		done := claim.EventKey{Provider: "stripe", EventID: "evt_done"}
		testfactory.SetDelivery(ctx, t, b.pool, claim.Key{Provider: done.Provider, EventID: done.EventID}, &testfactory.DeliveryOpts{Status: claim.DeliveryCompleted})
		testfactory.SetClaim(ctx, t, b.pool, done, &testfactory.ClaimOpts{Status: claim.Completed})
		jobs := b.jobs(t)
		r := b.post(t, signStripe(stripeEvent("evt_done", "checkout.session.completed"), stripeSecret, time.Now()))
		require.Equal(t, duplicate, r.body)
		require.Equal(t, jobs, b.jobs(t))
	})

	t.Run("same key, failed, provider reopens: failed deliveries processing again with a new job each", func(t *testing.T) {
		b.post(t, signStripe(stripeEvent("evt_failed", "invoice.paid"), stripeSecret, time.Now()))
		failed := claim.Key{Provider: "stripe", EventID: "evt_failed"}
		failed.Route = "ledger"
		testfactory.SetDelivery(ctx, t, b.pool, failed, &testfactory.DeliveryOpts{Status: claim.DeliveryCompleted})
		failed.Route = "ship-order"
		testfactory.SetDelivery(ctx, t, b.pool, failed, &testfactory.DeliveryOpts{Status: claim.DeliveryFailed, LastError: "HTTP 400"})
		testfactory.SetClaim(ctx, t, b.pool, claim.EventKey{Provider: failed.Provider, EventID: failed.EventID}, &testfactory.ClaimOpts{Status: claim.Failed})
		jobs := b.jobs(t)
		r := b.post(t, signStripe(stripeEvent("evt_failed", "invoice.paid"), stripeSecret, time.Now()))
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, accepted, r.body)
		c, _ := b.claimRow(t, "stripe", "evt_failed")
		require.Equal(t, "processing", c.Status)
		require.Equal(t, map[string]string{"ship-order": "processing", "ledger": "completed"}, b.deliveries(t, "stripe", "evt_failed"))
		require.Equal(t, jobs+1, b.jobs(t))

		r = b.post(t, signStripe(stripeEvent("evt_failed", "invoice.paid"), stripeSecret, time.Now()))
		require.Equal(t, duplicate, r.body, "a reopened claim is processing: the next copy is a duplicate")
	})

	t.Run("same key, failed, provider acks: duplicate", func(t *testing.T) {
		body := []byte(`{"ref": "refs/heads/main"}`)
		require.Equal(t, accepted, b.post(t, signGitHub("gh-failed", "push", body)).body)
		testfactory.SetDelivery(ctx, t, b.pool, claim.Key{Provider: "github", EventID: "gh-failed"}, &testfactory.DeliveryOpts{Status: claim.DeliveryFailed})
		testfactory.SetClaim(ctx, t, b.pool, claim.EventKey{Provider: "github", EventID: "gh-failed"}, &testfactory.ClaimOpts{Status: claim.Failed})
		jobs := b.jobs(t)
		require.Equal(t, duplicate, b.post(t, signGitHub("gh-failed", "push", body)).body)
		c, _ := b.claimRow(t, "github", "gh-failed")
		require.Equal(t, "failed", c.Status)
		require.Equal(t, jobs, b.jobs(t))
	})

	t.Run("unknown provider: 404", func(t *testing.T) {
		req := signStripe(stripeEvent("evt_unknown", "invoice.paid"), stripeSecret, time.Now())
		req.provider = "strpe"
		r := b.post(t, req)
		require.Equal(t, http.StatusNotFound, r.status)
		require.Contains(t, r.body["error"], "unknown provider")
		_, ok := b.claimRow(t, "strpe", "evt_unknown")
		require.False(t, ok)
	})

	rejected := []struct {
		name   string
		req    request
		status int
		id     string
	}{
		{"wrong secret", signStripe(stripeEvent("evt_bad1", "invoice.paid"), "whsec_wrong", time.Now()), 401, "evt_bad1"},
		{"missing signature", request{provider: "stripe", body: stripeEvent("evt_bad2", "invoice.paid")}, 401, "evt_bad2"},
		{"malformed signature", request{provider: "stripe", body: stripeEvent("evt_bad3", "invoice.paid"),
			header: http.Header{"Stripe-Signature": {"garbage"}}}, 401, "evt_bad3"},
		{"timestamp too old", signStripe(stripeEvent("evt_bad4", "invoice.paid"), stripeSecret, time.Now().Add(-time.Hour)), 401, "evt_bad4"},
		{"timestamp in the future", signStripe(stripeEvent("evt_bad5", "invoice.paid"), stripeSecret, time.Now().Add(time.Hour)), 401, "evt_bad5"},
		{"verified but id malformed", signStripe(stripeEvent("evt bad6", "invoice.paid"), stripeSecret, time.Now()), 400, "evt bad6"},
		{"verified but id missing", signStripe([]byte(`{"type": "invoice.paid"}`), stripeSecret, time.Now()), 400, ""},
		{"verified but body unparsable", signStripe([]byte(`{"id": "evt_bad7", `), stripeSecret, time.Now()), 400, "evt_bad7"},
		{"github without delivery id", signGitHub("", "push", []byte(`{}`)), 400, ""},
	}
	for _, tc := range rejected {
		t.Run(fmt.Sprintf("%s: %d, nothing recorded", tc.name, tc.status), func(t *testing.T) {
			claims, jobs := b.claims(t), b.jobs(t)
			r := b.post(t, tc.req)
			require.Equal(t, tc.status, r.status)
			require.NotEmpty(t, r.body["error"])
			require.NotContains(t, fmt.Sprint(r.body), "whsec_", "no secret in error bodies")
			require.Equal(t, claims, b.claims(t))
			require.Equal(t, jobs, b.jobs(t))
		})
	}

	t.Run("rotated previous secret accepted", func(t *testing.T) {
		r := b.post(t, signStripe(stripeEvent("evt_rotated", "invoice.paid"), stripeOld, time.Now()))
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, accepted, r.body)
	})

	t.Run("body over the limit: 413 by Content-Length and when chunked", func(t *testing.T) {
		big := stripeEvent("evt_big", "invoice.paid")
		big = append(big[:len(big)-1], []byte(`, "pad": "`+strings.Repeat("x", 70000)+`"}`)...)
		claims := b.claims(t)
		r := b.post(t, signStripe(big, stripeSecret, time.Now()))
		require.Equal(t, http.StatusRequestEntityTooLarge, r.status)

		signed := signStripe(big, stripeSecret, time.Now())
		req, err := http.NewRequest(http.MethodPost, b.base+"/webhooks/stripe", io.MultiReader(bytes.NewReader(signed.body)))
		require.NoError(t, err)
		req.Header = signed.header
		req.ContentLength = -1 // chunked
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		require.Equal(t, []string(nil), resp.TransferEncoding)
		require.Equal(t, claims, b.claims(t))
	})

	t.Run("the request log carries no body, signature or secret", func(t *testing.T) {
		logs := b.logs.String()
		require.Contains(t, logs, `"event_id":"evt_fanout"`)
		require.NotContains(t, logs, "whsec_")
		require.NotContains(t, logs, "v1=")
		require.NotContains(t, logs, `in_evt_fanout`, "payload content stays out of logs")
	})
}

// TestEverySchemeAcceptsRealPayloads sends real provider samples through
// each scheme, and checks the stored payload is byte-identical: whitespace,
// unicode escapes and key order survive.
func TestEverySchemeAcceptsRealPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	read := func(name string) []byte {
		body, err := os.ReadFile("../../internal/verify/testdata/" + name)
		require.NoError(t, err)
		return body
	}
	stripeBody := read("stripe_checkout_session_completed.json")
	swBody := read("standardwebhooks_invoice_paid.json")
	cases := []struct {
		req      request
		provider string
		id       string
		typ      string
		routes   []string
	}{
		{signStripe(stripeBody, stripeSecret, time.Now()), "stripe", jsonField(t, stripeBody, "id"), "checkout.session.completed", []string{"ship-order"}},
		{signGitHub("72d3162e-cc78-11e3-81ab-4c9367dc0958", "push", read("github_push.json")), "github", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "push", []string{"gh"}},
		{signShopify("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create", read("shopify_orders_create.json")), "shop", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create", []string{"shop-orders"}},
		{signSW(t, "msg_2Lq7x1", swBody), "sw", "msg_2Lq7x1", jsonField(t, swBody, "type"), []string{"sw-all"}},
		{signAcme("thing.happened", []byte("{\n  \"event\": {\"id\": \"acme-42\"},\n  \"name\": \"caf\\u00e9 \u00e9\"\n}")), "acme", "acme-42", "thing.happened", []string{"acme-all"}},
	}
	for _, tc := range cases {
		r := b.post(t, tc.req)
		require.Equal(t, http.StatusOK, r.status, "%s: %v", tc.provider, r.body)
		require.Equal(t, accepted, r.body)
		c, ok := b.claimRow(t, tc.provider, tc.id)
		require.True(t, ok, tc.provider)
		require.Equal(t, tc.typ, c.EventType)
		require.Equal(t, tc.req.body, c.Payload, "%s: stored byte for byte", tc.provider)
		require.Equal(t, "application/json", c.ContentType)
		got := b.deliveries(t, tc.provider, tc.id)
		require.Len(t, got, len(tc.routes))
		for _, r := range tc.routes {
			require.Equal(t, "processing", got[r])
		}
	}

	t.Run("re-serialized JSON no longer verifies", func(t *testing.T) {
		signed := signStripe(stripeBody, stripeSecret, time.Now())
		signed.body = bytes.ReplaceAll(signed.body, []byte("\\u00e9"), []byte("\u00e9"))
		require.NotEqual(t, stripeBody, signed.body)
		require.Equal(t, http.StatusUnauthorized, b.post(t, signed).status)
	})
}

func TestSameEventIDFromTwoProvidersMakesTwoClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := []byte(`{"type": "invoice.paid", "id": "shared-id"}`)
	require.Equal(t, accepted, b.post(t, signSW(t, "shared-id", body)).body)
	require.Equal(t, accepted, b.post(t, signGitHub("shared-id", "push", body)).body)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM webhook_event_claims WHERE event_id = 'shared-id'`))
}

// TestConcurrentCopiesClaimOnce sends 200 copies of one signed event at once:
// exactly one wins, every copy is answered 200, and the winner's deliveries
// and jobs exist exactly once.
func TestConcurrentCopiesClaimOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := signStripe(stripeEvent("evt_storm", "invoice.paid"), stripeSecret, time.Now())
	const copies = 200
	replies := make([]reply, copies)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range copies {
		wg.Go(func() {
			<-start
			replies[i] = b.post(t, req)
		})
	}
	close(start)
	wg.Wait()

	won := 0
	for _, r := range replies {
		require.Equal(t, http.StatusOK, r.status, "%v", r.body)
		if r.body["duplicate"] == false {
			won++
		}
	}
	require.Equal(t, 1, won, "exactly one copy is not a duplicate")
	require.Equal(t, 1, b.claims(t))
	require.Equal(t, map[string]string{"ship-order": "processing", "ledger": "processing"}, b.deliveries(t, "stripe", "evt_storm"))
	b.requireJobs(t,
		claim.DeliveryArgs{Provider: "stripe", EventID: "evt_storm", Route: "ship-order"},
		claim.DeliveryArgs{Provider: "stripe", EventID: "evt_storm", Route: "ledger"})
}

// TestMetricsStartAtZero: before any request, every counter an alert or a
// dashboard reads is already exposed at 0 for each configured provider and
// known reason, so that rates and ratios over them exist from the start.
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	b := setup(t)
	metrics := b.metrics(t)
	for _, p := range []string{"stripe", "github", "shop", "sw", "acme"} {
		for _, reason := range verify.UnauthorizedReasons() {
			require.Contains(t, metrics, fmt.Sprintf(`hookgate_signature_failures_total{provider=%q,reason=%q} 0`, p, reason))
		}
		require.Contains(t, metrics, fmt.Sprintf(`hookgate_duplicates_total{provider=%q} 0`, p))
		require.Contains(t, metrics, fmt.Sprintf(`hookgate_claims_reopened_total{provider=%q} 0`, p))
		require.Contains(t, metrics, fmt.Sprintf(`hookgate_ingest_unavailable_total{provider=%q} 0`, p))
		require.Contains(t, metrics, fmt.Sprintf(`hookgate_replays_total{provider=%q} 0`, p))
		require.Contains(t, metrics, fmt.Sprintf(`hookgate_claims_created_total{event_type="other",provider=%q} 0`, p))
	}
	// Event types a route names exactly; globs name no label value.
	require.Contains(t, metrics, `hookgate_claims_created_total{event_type="checkout.session.completed",provider="stripe"} 0`)
	require.Contains(t, metrics, `hookgate_claims_created_total{event_type="push",provider="github"} 0`)
	require.NotContains(t, metrics, `event_type="invoice.*"`)
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.post(t, signStripe(stripeEvent("evt_m", "invoice.paid"), stripeSecret, time.Now()))
	b.post(t, signStripe(stripeEvent("evt_m", "invoice.paid"), stripeSecret, time.Now()))
	b.post(t, signStripe(stripeEvent("evt_m2", "invoice.paid"), "whsec_wrong", time.Now()))

	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		resp, err := client.Get(b.base + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, path)
	}
	metrics := b.metrics(t)
	require.Contains(t, metrics, `hookgate_claims_created_total{event_type="other",provider="stripe"} 1`, "a type no route names exactly")
	require.Contains(t, metrics, `hookgate_duplicates_total{provider="stripe"} 1`)
	require.Contains(t, metrics, `hookgate_signature_failures_total{provider="stripe",reason="bad_signature"} 1`)
	require.Contains(t, metrics, `hookgate_ingest_requests_total{code="401",host="",method="POST",url="/webhooks/:provider"} 1`)
}
