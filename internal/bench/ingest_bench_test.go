package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/ingest"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// insertNotifyCooldown is ingest's River FetchCooldown (cmd/ingest): how
// often its job inserts may wake the workers.
const insertNotifyCooldown = time.Millisecond

// concurrency is the number of concurrent keep-alive connections (and, for
// the baseline, goroutines) in every ingest phase.
const concurrency = 64

const benchSecret = "whsec_bench"

const benchConfig = `
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [BENCH_STRIPE]
    replay_guard: off
  - name: stripe-bk
    scheme: stripe
    secrets_env: [BENCH_STRIPE]
  - name: stripe-guarded           # (a)'s provider with the replay guard on
    scheme: stripe
    secrets_env: [BENCH_STRIPE]
    replay_guard: body
  - name: stripe-filtered          # (a)'s provider, its route with a jq filter
    scheme: stripe
    secrets_env: [BENCH_STRIPE]
    replay_guard: off
routes:
  - name: ship-order
    provider: stripe
    events: ["invoice.*"]
    url: http://127.0.0.1:1/ship
  - name: ship-order-bk
    provider: stripe-bk
    events: ["invoice.*"]
    url: http://127.0.0.1:1/ship
    business_key: [type, "json:data.object.id"]
  - name: ship-order-guarded
    provider: stripe-guarded
    events: ["invoice.*"]
    url: http://127.0.0.1:1/ship
  - name: ship-filtered
    provider: stripe-filtered
    events: ["invoice.*"]
    filter: '.data.object.id | startswith("in_")'
    url: http://127.0.0.1:1/ship
`

// phase is the outcome of one measured phase.
type phase struct {
	name      string
	n         int
	elapsed   time.Duration
	latencies []time.Duration
}

func (p phase) rate() float64 { return float64(p.n) / p.elapsed.Seconds() }

// join is p and q measured as one phase (run in turns, so that drift in the
// machine's load or table growth falls on both of two compared phases).
func (p phase) join(q phase) phase {
	return phase{name: p.name, n: p.n + q.n, elapsed: p.elapsed + q.elapsed,
		latencies: append(slices.Clone(p.latencies), q.latencies...)}
}

func (p phase) pct(q float64) time.Duration {
	if len(p.latencies) == 0 {
		return 0
	}
	s := slices.Clone(p.latencies)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func (p phase) String() string {
	return fmt.Sprintf("%-40s %7d ops %9.0f ops/s  p50 %7.2f ms  p99 %7.2f ms",
		p.name, p.n, p.rate(), ms(p.pct(0.50)), ms(p.pct(0.99)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// hammer runs op n times from `concurrency` goroutines and records each
// call's latency.
func hammer(name string, n int, op func(i int) error) (phase, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return phase{name: name, n: n, elapsed: time.Since(start), latencies: lat}, firstErr
}

// BenchmarkIngest measures, on one database in one run:
//
//	(a) unique signed events through the real HTTP server (with group commit),
//	(b) a storm of copies of one event through the same server,
//	(c) the bare claim + job transaction, without HTTP or verification,
//	(d) unique signed events, as (a), to a provider whose route has a
//	    business key (type and data.object.id, distinct per event),
//	(e) a quarter as many distinct events all sharing one business key
//	    (all but one skipped),
//	(f) unique signed events, as (a), to a provider with the replay guard on,
//	(g) unique signed events, as (a), to a provider whose route has a jq
//	    filter (that matches, so each event is claimed as in (a)),
//
// each at the same concurrency, and reports (a)/(c), (b)/(a), (d)/(a),
// (f)/(a) with (f)'s p99 against (a)'s, and (g)/(a). (a), (d), (f) and (g)
// run in turns, an eighth of each at a time. Each phase sends BENCH_INGEST_EVENTS events
// (default 20000); run it with -benchtime 1x.
func BenchmarkIngest(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_INGEST_EVENTS", 20000)
	db := dbtest.NewDB(b)
	// A pool sized as the binaries size theirs (cmd/internal/cli.DefaultMaxConns).
	pcfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		b.Fatal(err)
	}
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	getenv := func(k string) string { return map[string]string{"BENCH_STRIPE": benchSecret}[k] }
	cfg, err := config.Parse([]byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	secrets, err := cfg.ResolveSecrets(getenv)
	if err != nil {
		b.Fatal(err)
	}
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{FetchCooldown: insertNotifyCooldown})
	if err != nil {
		b.Fatal(err)
	}
	store := claim.NewStore(pool, jobs, func(string) int { return 10 })
	group := ingest.NewGroup(store, ingest.GroupOptions{Timeout: cfg.Ingest.ClaimTimeout.D()})
	table, err := route.New(cfg, secrets.Headers)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := ingest.New(cfg, table, secrets, group, pool, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln) //nolint:errcheck // closed below
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/webhooks/stripe"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}

	type signed struct {
		body   []byte
		header string
	}
	signAbout := func(id, object string) signed {
		body := fmt.Appendf(nil, `{"id": %q, "object": "event", "type": "invoice.paid", "data": {"object": {"id": %q}}}`, id, object)
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: benchSecret})
		return signed{body: body, header: sp.Header}
	}
	sign := func(id string) signed { return signAbout(id, "in_"+id) }
	postTo := func(url string, s signed) error { return postStripe(client, url, s.body, s.header) }

	post := func(s signed) error { return postTo(url, s) }
	keyedURL := "http://" + ln.Addr().String() + "/webhooks/stripe-bk"
	guardedURL := "http://" + ln.Addr().String() + "/webhooks/stripe-guarded"
	filteredURL := "http://" + ln.Addr().String() + "/webhooks/stripe-filtered"

	unique, keyed, guarded, sharing := make([]signed, n), make([]signed, n), make([]signed, n), make([]signed, n/4)
	filtered := make([]signed, n)
	for i := range unique {
		unique[i] = sign(fmt.Sprintf("evt_unique_%d", i))
		keyed[i] = sign(fmt.Sprintf("evt_keyed_%d", i))
		guarded[i] = sign(fmt.Sprintf("evt_guarded_%d", i))
		filtered[i] = sign(fmt.Sprintf("evt_filtered_%d", i))
	}
	for i := range sharing {
		sharing[i] = signAbout(fmt.Sprintf("evt_sharing_%d", i), "in_shared")
	}
	storm := sign("evt_storm")
	// Warm connections, the pool and the plan cache outside the measurement.
	if _, err := hammer("warm-up", 4*concurrency, func(i int) error { return post(sign(fmt.Sprintf("evt_warm_%d", i))) }); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	// The baseline runs first, on the smallest tables, so that any slowdown
	// from table growth counts against our path rather than for it.
	c, err := hammer("(c) bare claim+job transaction", n, func(i int) error {
		id := fmt.Sprintf("evt_bare_%d", i)
		_, err := testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid", ObjectID: "in_" + id,
			ContentType: "application/json", Payload: unique[i].body}, []string{"ship-order"}, true)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	// (a), (d), (f) and (g) in turns, an eighth of each at a time and which
	// goes first rotating, so that the machine's changing load and the
	// tables' growth fall on all of them alike.
	const turns = 8
	a := phase{name: "(a) unique events, HTTP"}
	d := phase{name: "(d) unique events, business key, HTTP"}
	f := phase{name: "(f) unique events, replay guard, HTTP"}
	g := phase{name: "(g) unique events, jq filter, HTTP"}
	turnPhases := []struct {
		p      *phase
		url    string
		events []signed
	}{{&a, url, unique}, {&d, keyedURL, keyed}, {&f, guardedURL, guarded}, {&g, filteredURL, filtered}}
	for turn := range turns {
		from, to := n*turn/turns, n*(turn+1)/turns
		for k := range turnPhases {
			tp := turnPhases[(turn+k)%len(turnPhases)]
			q, err := hammer("", to-from, func(i int) error { return postTo(tp.url, tp.events[from+i]) })
			if err != nil {
				b.Fatal(err)
			}
			*tp.p = tp.p.join(q)
		}
	}
	st, err := hammer("(b) one event id storm, HTTP", n, func(int) error { return post(storm) })
	if err != nil {
		b.Fatal(err)
	}
	e, err := hammer("(e) distinct events, one business key", len(sharing), func(i int) error { return postTo(keyedURL, sharing[i]) })
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()

	var claims, jobsN int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_event_claims), (SELECT count(*) FROM river_job)`).Scan(&claims, &jobsN); err != nil {
		b.Fatal(err)
	}
	want := 4*concurrency + n + 1 + n + n + n + n
	// (e)'s events are claimed; all but the one holding the key have no job.
	if claims != want+len(sharing) || jobsN != want+1 {
		b.Fatalf("expected %d claims and %d jobs, found %d claims and %d jobs", want+len(sharing), want+1, claims, jobsN)
	}
	var keys int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_business_keys`).Scan(&keys); err != nil {
		b.Fatal(err)
	}
	if keys != n+1 {
		b.Fatalf("expected %d business keys, found %d", n+1, keys)
	}

	fmt.Fprintf(os.Stdout, "\ningest, %d concurrent connections, %d events per phase\n", concurrency, n)
	for _, p := range []phase{a, st, c, d, e, f, g} {
		fmt.Fprintln(os.Stdout, p)
	}
	fmt.Fprintf(os.Stdout, "ratio (a)/(c) = %.2f   (target >= 0.6)\nratio (b)/(a) = %.2f   (target >= 1.0)\nratio (d)/(a) = %.2f   (target >= 0.85)\n",
		a.rate()/c.rate(), st.rate()/a.rate(), d.rate()/a.rate())
	fmt.Fprintf(os.Stdout, "ratio (f)/(a) = %.2f, p99 (f)/(a) = %.2f   (the replay guard: target >= 0.9 and <= 1.1)\n",
		f.rate()/a.rate(), float64(f.pct(0.99))/float64(a.pct(0.99)))
	fmt.Fprintf(os.Stdout, "ratio (g)/(a) = %.2f   (a jq filter: target >= 0.9)\n\n", g.rate()/a.rate())
	b.ReportMetric(a.rate(), "unique_req/s")
	b.ReportMetric(st.rate(), "storm_req/s")
	b.ReportMetric(c.rate(), "bare_tx/s")
	b.ReportMetric(a.rate()/c.rate(), "a/c")
	b.ReportMetric(d.rate(), "business_key_req/s")
	b.ReportMetric(d.rate()/a.rate(), "d/a")
	b.ReportMetric(e.rate(), "shared_key_req/s")
	b.ReportMetric(ms(a.pct(0.99)), "unique_p99_ms")
	b.ReportMetric(f.rate(), "guarded_req/s")
	b.ReportMetric(ms(f.pct(0.99)), "guarded_p99_ms")
	b.ReportMetric(f.rate()/a.rate(), "f/a")
	b.ReportMetric(g.rate()/a.rate(), "g/a")
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// envInt reads a positive integer setting of the benchmarks.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
