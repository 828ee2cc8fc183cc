package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/reconcile"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/secretfile"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	stripeKey   = "rk_test_reconcile_secret_key_4242"
	githubToken = "ghp_reconcile_secret_token_9999"
)

// lockedBuffer is a log sink goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bundle is what a test needs: a database of its own, the claim store
// over it, fake provider APIs and the reconciler pointed at them.
type bundle struct {
	db      *dbtest.DB
	store   *claim.Store
	table   *route.Table
	cfg     *config.Config
	r       *reconcile.Reconciler
	stripe  *fakeStripe
	github  *fakeGitHub
	logs    *lockedBuffer
	reg     *prometheus.Registry
	metrics *reconcile.Metrics
}

// setup builds the bundle; routes are the stripe provider's route lines.
func setup(t *testing.T, stripeRoutes string) *bundle {
	t.Helper()
	b := &bundle{db: dbtest.NewDB(t), logs: &lockedBuffer{}, reg: prometheus.NewRegistry()}
	b.stripe = newFakeStripe(t, stripeKey)
	b.github = newFakeGitHub(t, githubToken, "repos/acme/shop/hooks/123")
	cfg, err := config.Parse([]byte(fmt.Sprintf(`providers:
  - name: stripe
    scheme: stripe
    secrets_env: [STRIPE_WHSEC]
    reconcile: {api_key_env: STRIPE_KEY, api_base: %q, every: 1s}
  - name: github
    scheme: github
    secrets_env: [GH_SECRET]
    reconcile: {token_env: GH_TOKEN, hook: repos/acme/shop/hooks/123, api_base: %q}
routes:
%s
  - {name: gh, provider: github, events: ["*"], url: "http://127.0.0.1:9/gh"}
`, b.stripe.URL, b.github.URL, stripeRoutes)))
	require.NoError(t, err)
	b.cfg = cfg
	b.table, err = route.New(cfg, nil)
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	b.store = claim.NewStore(b.db.Pool, client, b.table.MaxAttempts)
	b.metrics = reconcile.NewMetrics(b.reg)
	b.r = b.reconciler(t, map[string]string{"STRIPE_KEY": stripeKey, "GH_TOKEN": githubToken})
	return b
}

func (b *bundle) reconciler(t *testing.T, env map[string]string) *reconcile.Reconciler {
	t.Helper()
	r, err := reconcile.New(reconcile.Options{
		Config: b.cfg, Routes: b.table, Stores: func(string) reconcile.Store { return b.store },
		Getenv: func(k string) string { return env[k] }, Resolver: secretfile.Resolver{},
		Metrics: b.metrics, Logger: slog.New(slog.NewJSONHandler(b.logs, nil)),
	})
	require.NoError(t, err)
	return r
}

const shipRoute = `  - {name: ship, provider: stripe, events: [invoice.paid], url: "http://127.0.0.1:9/ship"}`

// run runs a reconciliation of provider and requires it succeeded.
func (b *bundle) run(t *testing.T, o reconcile.Run) claim.ReconcileRun {
	t.Helper()
	o.Trigger = cmpOr(o.Trigger, claim.TriggerCLI)
	rec, err := b.r.Run(t.Context(), o)
	require.NoError(t, err)
	return rec
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// deliveries counts the delivery rows of a stripe claim.
func (b *bundle) deliveries(t *testing.T, id string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(t.Context(),
		`SELECT count(*) FROM webhook_deliveries WHERE provider = 'stripe' AND event_id = $1`, id).Scan(&n))
	return n
}

// webhook claims a stripe event as ingest would.
func (b *bundle) webhook(t *testing.T, id string, payload []byte) claim.Result {
	t.Helper()
	res, err := b.store.Claim(t.Context(), claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid",
		ContentType: "application/json", Payload: payload}, []string{"ship"}, true)
	require.NoError(t, err)
	return res
}

// TestStripeClaimsMissedEventsOnce: over several pages, the events no
// webhook brought are claimed once, with source reconcile and the API's
// bytes, fanned out to their routes; those a webhook brought are left as
// they are; a second run claims nothing more; a webhook copy arriving
// later is a duplicate.
func TestStripeClaimsMissedEventsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	ctx := t.Context()
	now := time.Now()
	const n = 230 // three pages of 100
	for i := range n {
		b.stripe.add(fmt.Sprintf("evt_%03d", i), "invoice.paid", now.Add(-time.Duration(n-i)*time.Minute))
	}
	b.stripe.add("evt_other", "customer.created", now.Add(-time.Hour)) // not listed: types[]
	// Delivered by webhook before: left alone.
	for _, id := range []string{"evt_000", "evt_150", "evt_229"} {
		require.Equal(t, claim.Claimed, b.webhook(t, id, []byte(`{"webhook":true}`)).Decision)
	}

	rec := b.run(t, reconcile.Run{Provider: "stripe"})
	require.Equal(t, []int{n, n - 3, 0, 3}, []int{rec.Listed, rec.Claimed, rec.Redelivered, rec.Skipped})
	require.Empty(t, rec.Error)
	require.NotNil(t, rec.Newest)
	require.Equal(t, now.Add(-time.Minute).Unix(), rec.Newest.Unix())

	qs := b.stripe.queries()
	require.Len(t, qs, 3, "three pages")
	require.Equal(t, []string{"invoice.paid"}, qs[0]["types[0]"])
	require.Equal(t, "100", qs[0].Get("limit"))
	require.Empty(t, qs[0].Get("starting_after"))
	require.Equal(t, "evt_130", qs[1].Get("starting_after"), "the last (oldest) of the first page")
	require.Equal(t, "evt_030", qs[2].Get("starting_after"))
	wantSince := now.Add(-72 * time.Hour).Unix()
	gte := qs[0].Get("created[gte]")
	require.InDelta(t, wantSince, atoi(t, gte), 5, "the first run looks back 72h")

	c, ds, err := b.store.Get(ctx, "stripe", "evt_042")
	require.NoError(t, err)
	require.Equal(t, claim.SourceReconcile, c.Source)
	require.Equal(t, claim.Processing, c.Status)
	require.Len(t, ds, 1)
	require.Equal(t, "ship", ds[0].Route)
	payload, _, err := b.store.Payload(ctx, "stripe", "evt_042")
	require.NoError(t, err)
	require.JSONEq(t, string(b.stripe.raw(t, "evt_042")), string(payload), "the API's JSON of the event")

	c, _, err = b.store.Get(ctx, "stripe", "evt_150")
	require.NoError(t, err)
	require.Equal(t, claim.SourceWebhook, c.Source, "delivered ones untouched")
	payload, _, err = b.store.Payload(ctx, "stripe", "evt_150")
	require.NoError(t, err)
	require.Equal(t, `{"webhook":true}`, string(payload))
	require.Equal(t, 1, b.deliveries(t, "evt_150"))

	// Again: nothing more is claimed; every event has one delivery.
	again := b.run(t, reconcile.Run{Provider: "stripe"})
	require.Zero(t, again.Claimed)
	require.Equal(t, again.Listed, again.Skipped)
	for _, id := range []string{"evt_000", "evt_042", "evt_229"} {
		require.Equal(t, 1, b.deliveries(t, id), id)
	}
	qs = b.stripe.queries()
	require.Equal(t, strconvI(rec.Newest.Add(-time.Minute).Unix()), qs[3].Get("created[gte]"),
		"the next run starts a minute before the last one's newest event")

	// The webhook copy that arrives now is a duplicate.
	require.Equal(t, claim.Duplicate, b.webhook(t, "evt_042", b.stripe.raw(t, "evt_042")).Decision)
	require.Equal(t, 1, b.deliveries(t, "evt_042"))

	require.Equal(t, float64(n-3), counter(t, b, "stripe", reconcile.OutcomeClaimed))
}

// counter reads one series of hookgate_reconciled_events_total.
func counter(t *testing.T, b *bundle, provider, outcome string) float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "hookgate_reconciled_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	_, err := fmt.Sscan(s, &v)
	require.NoError(t, err)
	return v
}

func strconvI(v int64) string { return fmt.Sprint(v) }

// TestStripeDryRunChangesNothing: a dry run counts what it would claim,
// claims nothing, and leaves the next run's window where it was.
func TestStripeDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	now := time.Now()
	b.stripe.add("evt_dry_1", "invoice.paid", now.Add(-2*time.Hour))
	b.stripe.add("evt_dry_2", "invoice.paid", now.Add(-time.Hour))
	b.webhook(t, "evt_dry_2", []byte(`{}`))

	rec := b.run(t, reconcile.Run{Provider: "stripe", DryRun: true})
	require.True(t, rec.DryRun)
	require.Equal(t, []int{2, 1, 1}, []int{rec.Listed, rec.Claimed, rec.Skipped})
	_, _, err := b.store.Get(t.Context(), "stripe", "evt_dry_1")
	require.ErrorIs(t, err, claim.ErrNotFound)
	cursor, err := b.store.ReconcileCursor(t.Context(), "stripe")
	require.NoError(t, err)
	require.Nil(t, cursor, "a dry run does not move the window")
	require.Zero(t, counter(t, b, "stripe", reconcile.OutcomeClaimed))
}

// TestStripeGlobRoutesListEveryType: with a glob route, every type is
// listed and the route table's own matcher picks what to claim.
func TestStripeGlobRoutesListEveryType(t *testing.T) {
	t.Parallel()
	b := setup(t, `  - {name: ship, provider: stripe, events: ["invoice.*"], url: "http://127.0.0.1:9/ship"}`)
	now := time.Now()
	b.stripe.add("evt_g1", "invoice.paid", now.Add(-time.Hour))
	b.stripe.add("evt_g2", "customer.created", now.Add(-time.Hour))
	rec := b.run(t, reconcile.Run{Provider: "stripe"})
	require.Equal(t, []int{2, 1, 1}, []int{rec.Listed, rec.Claimed, rec.Skipped})
	require.NotContains(t, b.stripe.queries()[0], "types[0]")
	_, _, err := b.store.Get(t.Context(), "stripe", "evt_g2")
	require.ErrorIs(t, err, claim.ErrNotFound)
}

// TestStripeUnauthorizedNamesProviderNotKey: a 401 fails the run with an
// error naming the provider, recorded on the run; the key is in no error,
// no run and no log line, though the provider's answer quoted it.
func TestStripeUnauthorizedNamesProviderNotKey(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	b.stripe.key = "rk_test_another_key"
	b.stripe.add("evt_401", "invoice.paid", time.Now().Add(-time.Hour))
	rec, err := b.r.Run(t.Context(), reconcile.Run{Provider: "stripe", Trigger: claim.TriggerSchedule})
	require.ErrorIs(t, err, reconcile.ErrUnauthorized)
	require.Contains(t, err.Error(), "reconciling stripe")
	require.Contains(t, err.Error(), "401")
	require.Equal(t, err.Error(), rec.Error)
	runs, err := b.store.ReconcileRuns(t.Context(), "stripe", 0)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, rec.Error, runs[0].Error)
	require.NotNil(t, runs[0].FinishedAt)
	for _, s := range []string{rec.Error, b.logs.String()} {
		require.NotContains(t, s, stripeKey)
		require.NotContains(t, s, stripeKey[8:])
	}
	require.Contains(t, b.logs.String(), "reconciliation failed")
	// The next run is tried as usual, and goes through once the key is right.
	b.stripe.key = stripeKey
	require.Equal(t, 1, b.run(t, reconcile.Run{Provider: "stripe"}).Claimed)
}

// TestStripeWaitsOutRateLimit: a 429 is waited out by its Retry-After.
func TestStripeWaitsOutRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	b.stripe.limited = 1
	b.stripe.add("evt_429", "invoice.paid", time.Now().Add(-time.Hour))
	rec := b.run(t, reconcile.Run{Provider: "stripe"})
	require.Equal(t, 1, rec.Claimed)
	require.Len(t, b.stripe.queries(), 2)
}

// TestTwoRunsNeverOverlap: while one run of a provider is under way (its
// API call held), another, as from a second worker, ends at once without
// calling the API or recording a run; another provider runs meanwhile.
func TestTwoRunsNeverOverlap(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	b.stripe.add("evt_lock", "invoice.paid", time.Now().Add(-time.Hour))
	b.stripe.hold, b.stripe.entered = make(chan struct{}), make(chan struct{}, 4)
	second := b.reconciler(t, map[string]string{"STRIPE_KEY": stripeKey, "GH_TOKEN": githubToken})
	done := make(chan error, 1)
	go func() {
		_, err := b.r.Run(context.Background(), reconcile.Run{Provider: "stripe", Trigger: claim.TriggerSchedule})
		done <- err
	}()
	<-b.stripe.entered
	_, err := second.Run(t.Context(), reconcile.Run{Provider: "stripe", Trigger: claim.TriggerSchedule})
	require.ErrorIs(t, err, claim.ErrReconcileRunning)
	_, err = second.Run(t.Context(), reconcile.Run{Provider: "github", Trigger: claim.TriggerSchedule})
	require.NoError(t, err)
	close(b.stripe.hold)
	require.NoError(t, <-done)
	require.Len(t, b.stripe.queries(), 1, "one run called the API")
	runs, err := b.store.ReconcileRuns(t.Context(), "stripe", 0)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, 1, runs[0].Claimed)
}

// TestPeriodicRunFindsNewEvent: the worker's River client runs each
// provider's reconciliation every reconcile.every by itself: an event
// created after the first run is claimed by a later one.
func TestPeriodicRunFindsNewEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	ctx := t.Context()
	workers := river.NewWorkers()
	river.AddWorker(workers, reconcile.NewWorker(b.r, time.Minute))
	client, err := river.NewClient(riverpgxv5.New(b.db.Pool), &river.Config{
		TestOnly: true, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		PeriodicJobs: b.r.PeriodicJobs(), FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	})
	waitRuns := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			runs, err := b.store.ReconcileRuns(ctx, "stripe", 0)
			return err == nil && len(runs) >= n && runs[0].FinishedAt != nil
		}, 30*time.Second, 20*time.Millisecond)
	}
	waitRuns(1) // the run at start
	b.stripe.add("evt_new", "invoice.paid", time.Now())
	require.Eventually(t, func() bool {
		c, _, err := b.store.Get(ctx, "stripe", "evt_new")
		return err == nil && c.Source == claim.SourceReconcile
	}, 30*time.Second, 20*time.Millisecond)
	runs, err := b.store.ReconcileRuns(ctx, "stripe", 0)
	require.NoError(t, err)
	for _, r := range runs {
		require.Equal(t, claim.TriggerSchedule, r.Trigger)
	}
}

// TestGitHubRedeliversFailedUnclaimed: over several Link pages, each
// failed delivery whose guid no claim holds is redelivered once (the POST
// to .../deliveries/{id}/attempts); delivered, claimed and out-of-window
// ones are not.
func TestGitHubRedeliversFailedUnclaimed(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	now := time.Now()
	id := int64(1000)
	// 250 delivered ones over three pages, then the interesting ones.
	for i := range 250 {
		id++
		b.github.add(id, fmt.Sprintf("ok-%d", i), 200, false, now.Add(-time.Duration(i+10)*time.Minute))
	}
	b.github.add(1, "missed-1", 502, false, now.Add(-5*time.Hour))
	b.github.add(2, "claimed-1", 500, false, now.Add(-5*time.Hour))
	b.github.add(3, "retried-ok", 500, false, now.Add(-6*time.Hour))
	b.github.add(4, "retried-ok", 200, true, now.Add(-5*time.Hour))
	b.github.add(5, "missed-2", 0, false, now.Add(-7*time.Hour)) // timed out: no status
	b.github.add(6, "missed-2", 503, true, now.Add(-6*time.Hour))
	b.github.add(7, "too-old", 500, false, now.Add(-80*time.Hour))
	_, err := b.store.Claim(t.Context(), claim.Event{Provider: "github", ID: "claimed-1", Type: "push",
		ContentType: "application/json", Payload: []byte(`{}`)}, []string{"gh"}, true)
	require.NoError(t, err)

	dry := b.run(t, reconcile.Run{Provider: "github", DryRun: true})
	require.Equal(t, 2, dry.Redelivered)
	require.Empty(t, b.github.posts(), "a dry run asks for nothing")

	rec := b.run(t, reconcile.Run{Provider: "github"})
	require.Equal(t, 250+6, rec.Listed)
	require.Equal(t, 2, rec.Redelivered)
	require.Equal(t, 252, rec.Skipped) // 250 + retried-ok + claimed-1
	require.ElementsMatch(t, []string{
		"/repos/acme/shop/hooks/123/deliveries/1/attempts",
		"/repos/acme/shop/hooks/123/deliveries/5/attempts",
	}, b.github.posts())
	require.GreaterOrEqual(t, b.github.pages, 3)
}

// TestGitHubUnauthorized: a 401 fails the run naming the provider, never
// the token, which the answer quoted.
func TestGitHubUnauthorized(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	b.github.token = "another"
	rec, err := b.r.Run(t.Context(), reconcile.Run{Provider: "github", Trigger: claim.TriggerAPI})
	require.ErrorIs(t, err, reconcile.ErrUnauthorized)
	require.True(t, strings.HasPrefix(rec.Error, "reconciling github: "), rec.Error)
	require.NotContains(t, rec.Error, githubToken)
	require.NotContains(t, b.logs.String(), githubToken)
}

// TestNewNamesMissingCredential: a credential that is not set stops the
// start with an error naming its key and variable.
func TestNewNamesMissingCredential(t *testing.T) {
	t.Parallel()
	b := setup(t, shipRoute)
	_, err := reconcile.New(reconcile.Options{
		Config: b.cfg, Routes: b.table, Stores: func(string) reconcile.Store { return b.store },
		Getenv: func(k string) string { return map[string]string{"GH_TOKEN": githubToken}[k] }, Resolver: secretfile.Resolver{},
	})
	require.EqualError(t, err, "providers[0].reconcile.api_key_env: environment variable STRIPE_KEY is not set or empty")
	_, err = b.r.Run(t.Context(), reconcile.Run{Provider: "nope", Trigger: claim.TriggerCLI})
	require.ErrorIs(t, err, reconcile.ErrNotConfigured)
}
