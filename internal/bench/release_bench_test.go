package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
)

// defaultRelease is the last release, BenchmarkRelease's default
// BENCH_RELEASE: main as it was before the jq bounds and the redaction of
// echoed secrets.
const defaultRelease = "70d9d2a"

// releaseFilter is the route filter of BenchmarkRelease's ingest phase: the
// event's type and fields nested in its object. It matches every event sent.
const releaseFilter = `.type == "checkout.session.completed" and .data.object.metadata.ship == "true" and ` +
	`.data.object.amount_total > 0 and (.data.object.shipping_details.address.country | IN("GB", "FR", "DE"))`

// releaseConfig is one config both builds accept (only keys the release
// knows): for ingest alone, a provider whose route is plain (plain), one
// whose route has a filter (stripe), and one whose route has the same
// filter and a business key read from the body (keyed); for the worker's
// drain, one whose route relays the payload as it is (relay) and one whose
// route has a body program (shop). Each phase posts to its own provider,
// so ingest's phases leave nothing the drains reach.
const releaseConfig = `
worker:
  concurrency: %[1]d
providers:
  - {name: plain, scheme: stripe, secrets_env: [BENCH_STRIPE], replay_guard: "off"}
  - {name: stripe, scheme: stripe, secrets_env: [BENCH_STRIPE], replay_guard: "off"}
  - {name: keyed, scheme: stripe, secrets_env: [BENCH_STRIPE], replay_guard: "off"}
  - {name: relay, scheme: stripe, secrets_env: [BENCH_STRIPE], replay_guard: "off"}
  - {name: shop, scheme: stripe, secrets_env: [BENCH_STRIPE], replay_guard: "off"}
routes:
  - name: record
    provider: plain
    events: ["checkout.session.*"]
    url: %[3]s/record
  - name: fulfil
    provider: stripe
    events: ["checkout.session.*"]
    filter: '%[2]s'
    url: %[3]s/fulfil
  - name: fulfil-once
    provider: keyed
    events: ["checkout.session.*"]
    filter: '%[2]s'
    business_key: [type, "json:data.object.id"]
    url: %[3]s/fulfil-once
  - name: forward
    provider: relay
    events: ["checkout.session.*"]
    url: %[3]s/forward
  - name: ship
    provider: shop
    events: ["checkout.session.*"]
    body: '%[4]s'
    url: %[3]s/ship
`

// releaseIngest and releaseDrain are BenchmarkRelease's kinds of phase:
// the provider posted to and the route its events are delivered by.
type releaseKind struct{ name, provider, route string }

var (
	releaseIngest = []releaseKind{
		{"ingest, plain", "plain", "record"},
		{"ingest, a filter", "stripe", "fulfil"},
		{"ingest, a filter and a business key", "keyed", "fulfil-once"},
	}
	releaseDrain = []releaseKind{
		{"worker drain, raw relay", "relay", "forward"},
		{"worker drain, a body", "shop", "ship"},
	}
)

// build is one build of ingest and worker with a database of its own,
// migrated by its own binary, and a downstream of its own.
type build struct {
	name   string
	dir    string // holds ingest and worker
	url    string // DATABASE_URL
	pool   *pgxpool.Pool
	down   *sink
	cfg    string
	ingest *process
	sent   int // events sent to the drains' routes so far
	server server
	dbName string
}

// pgCPU returns the CPU-seconds used so far by the Postgres backends alive
// now that serve bd's database (their process title names it), so that
// other work on the server is not counted.
func (bd *build) pgCPU() float64 {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := strconv.Itoa(bd.server.pid)
	total := 0.0
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) < 2 || f[1] != parent {
			continue
		}
		title, err := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline"))
		if err != nil || !slices.Contains(strings.Fields(strings.ReplaceAll(string(title), "\x00", " ")), bd.dbName) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		total += cpuOf(pid)
	}
	return total
}

func (bd *build) env() []string {
	return []string{"DATABASE_URL=" + bd.url, "BENCH_STRIPE=" + benchSecret}
}

// BenchmarkRelease measures this tree against the last release
// (BENCH_RELEASE, a git revision, default defaultRelease), black-box, in
// one run: each build's binaries on a database of its own, migrated by
// that build's `ingest migrate`, with the same config.
//
//   - the drains (releaseDrain): events accepted beforehand by the build's
//     own ingest, then drained by its worker to an instant downstream,
//     through a route that relays the payload as it is, and through one
//     whose body program builds a shipping API's request from a Stripe
//     checkout; the rate between the first and last completion. It checks
//     each build's downstream saw every event exactly once;
//   - ingest (releaseIngest): ingest alone (no worker), 64 keep-alive
//     senders, unique Stripe-signed checkouts to a plain route, to a route
//     whose filter reads the type and nested fields (and matches), and to
//     one with that filter and a business key read from the body (where
//     this tree parses the body once for verification, filter and key); it
//     checks each event left its delivery.
//
// Each kind runs four times, taking turns, release, today, today, release,
// each build read as its two turns together, so that drift in the
// machine's load falls on both alike. The drains run first: ingest's
// phases leave deliveries no worker is to drain. Besides the rates, it
// reports each binary's CPU per event and that of the Postgres backends
// serving its database. It prints today/release last; the targets are
// >= 0.97 plain (one claim path) and >= 0.95 with a filter or a body (the
// jq bounds). BENCH_RELEASE_EVENTS (default 10000) events per turn. It
// needs the repository's git history.
func BenchmarkRelease(b *testing.B) {
	n := envInt("BENCH_RELEASE_EVENTS", 10000)
	rev := os.Getenv("BENCH_RELEASE")
	if rev == "" {
		rev = defaultRelease
	}
	release := &build{name: "release " + rev, dir: buildRevision(b, rev)}
	today := &build{name: "today", dir: buildTree(b, filepath.Join("..", ".."))}
	for _, bd := range []*build{release, today} {
		setUpBuild(b, bd)
	}
	indexes := "the release's own"
	if os.Getenv("BENCH_RELEASE_INDEXES") == "today" {
		matchIndexes(b, release, today)
		indexes = "today's"
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}
	send := func(bd *build, provider, prefix string) (phase, error) {
		evs := make([]signedEvent, n)
		for i := range evs {
			evs[i] = signCheckout(fmt.Sprintf("%s%d", prefix, i))
		}
		url := bd.ingest.base + "/webhooks/" + provider
		return hammer(bd.name, n, func(i int) error { return postStripe(client, url, evs[i].body, evs[i].header) })
	}
	turns := []*build{release, today, today, release}

	b.ResetTimer()
	// The drains: each kind's four turns, then the next kind's.
	drains := make([]map[*build][]float64, len(releaseDrain))
	drainCPU := make([]map[*build][2]float64, len(releaseDrain)) // the worker's, its backends'
	for k, kind := range releaseDrain {
		drains[k], drainCPU[k] = map[*build][]float64{}, map[*build][2]float64{}
		for i, bd := range turns {
			prefix := fmt.Sprintf("evt_drain%d_%d_", k, i)
			if _, err := send(bd, kind.provider, prefix); err != nil {
				b.Fatalf("%s: accepting: %v", bd.name, err)
			}
			pg0 := bd.pgCPU()
			worker := startBuild(b, bd, "worker")
			bd.sent += n
			waitDrained(b, bd.pool, bd.down, bd.sent)
			c := drainCPU[k][bd]
			c[0] += cpuOf(worker.pid())
			c[1] += bd.pgCPU() - pg0
			drainCPU[k][bd] = c
			worker.stop(b)
			drains[k][bd] = append(drains[k][bd], spanRate(b, bd.pool, `SELECT count(*), min(completed_at), max(completed_at)
FROM webhook_deliveries WHERE route = '`+kind.route+`' AND starts_with(event_id, '`+prefix+`')`))
		}
	}
	for _, bd := range []*build{release, today} {
		if events, effects, repeated := bd.down.events(), bd.down.effects(), bd.down.repeated(); events != bd.sent || effects != bd.sent || repeated != 0 {
			b.Fatalf("%s: the downstream saw %d events, %d keys, %d of them more than once; want %d, %d, none",
				bd.name, events, effects, repeated, bd.sent, bd.sent)
		}
	}

	// Ingest alone, the workers stopped, from tables both vacuumed after
	// the drains: else autovacuum would fall on whichever build's turn it
	// happened to start in. Each kind's four turns, then the next kind's.
	for _, bd := range []*build{release, today} {
		if _, err := bd.pool.Exec(context.Background(), `VACUUM (ANALYZE)`); err != nil {
			b.Fatal(err)
		}
	}
	ingests := make([]map[*build]phase, len(releaseIngest))
	ingestCPU := make([]map[*build][2]float64, len(releaseIngest)) // ingest's, its backends'
	ingestTurns := make([][]phase, len(releaseIngest))
	for k, kind := range releaseIngest {
		ingests[k], ingestCPU[k] = map[*build]phase{}, map[*build][2]float64{}
		for i, bd := range turns {
			cpu0, pg0 := cpuOf(bd.ingest.pid()), bd.pgCPU()
			p, err := send(bd, kind.provider, fmt.Sprintf("evt_ingest%d_%d_", k, i))
			if err != nil {
				b.Fatalf("%s: %s: %v", bd.name, kind.name, err)
			}
			c := ingestCPU[k][bd]
			c[0] += cpuOf(bd.ingest.pid()) - cpu0
			c[1] += bd.pgCPU() - pg0
			ingestCPU[k][bd] = c
			ingestTurns[k] = append(ingestTurns[k], p)
			if q, ok := ingests[k][bd]; ok {
				p = q.join(p)
			}
			ingests[k][bd] = p
		}
	}
	b.StopTimer()
	for k, kind := range releaseIngest {
		for _, bd := range []*build{release, today} {
			var routed int
			if err := bd.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries
WHERE route = $1 AND status = 'processing' AND starts_with(event_id, $2)`, kind.route, fmt.Sprintf("evt_ingest%d_", k)).Scan(&routed); err != nil {
				b.Fatal(err)
			}
			if routed != 2*n {
				b.Fatalf("%s: %d events of %q have a delivery to be made, want %d (the routes match them all, and their business keys are distinct)",
					bd.name, routed, kind.name, 2*n)
			}
		}
	}

	mean := func(r []float64) float64 { return (r[0] + r[1]) / 2 }
	// CPU-ms per event: less moved by the machine's other load than the rates.
	perEvent := func(sec float64) float64 { return sec / float64(2*n) * 1000 }
	out := os.Stdout
	fmt.Fprintf(out, "\nagainst the last release (%s; its claim and delivery tables with %s indexes), %d events per turn, %d senders, worker.concurrency %d\n",
		rev, indexes, n, concurrency, workerConcurrency())
	fmt.Fprintf(out, "%-48s %12s %12s %14s\n", "", "release", "today", "today/release")
	row := func(name, format string, r, t float64) {
		fmt.Fprintf(out, "%-48s "+format+" "+format+" %14.2f\n", name, r, t, t/r)
	}
	for k, kind := range releaseIngest {
		ia, it := ingests[k][release], ingests[k][today]
		row(kind.name+": requests/s", "%12.0f", ia.rate(), it.rate())
		row(kind.name+": p50 ms", "%12.2f", ms(ia.pct(0.50)), ms(it.pct(0.50)))
		row(kind.name+": p99 ms", "%12.2f", ms(ia.pct(0.99)), ms(it.pct(0.99)))
		row("  CPU-ms per request, ingest", "%12.3f", perEvent(ingestCPU[k][release][0]), perEvent(ingestCPU[k][today][0]))
		row("  CPU-ms per request, its database's backends", "%12.3f", perEvent(ingestCPU[k][release][1]), perEvent(ingestCPU[k][today][1]))
	}
	for k, kind := range releaseDrain {
		row(kind.name+": events/s", "%12.0f", mean(drains[k][release]), mean(drains[k][today]))
		row("  CPU-ms per event, worker", "%12.3f", perEvent(drainCPU[k][release][0]), perEvent(drainCPU[k][today][0]))
		row("  CPU-ms per event, its database's backends", "%12.3f", perEvent(drainCPU[k][release][1]), perEvent(drainCPU[k][today][1]))
	}
	fmt.Fprintf(out, "turns (release, today, today, release):\n")
	for k, kind := range releaseIngest {
		fmt.Fprintf(out, "  %-40s", kind.name)
		for _, p := range ingestTurns[k] {
			fmt.Fprintf(out, "  %.0f requests/s, p99 %.0f ms;", p.rate(), ms(p.pct(0.99)))
		}
		fmt.Fprintln(out)
	}
	for k, kind := range releaseDrain {
		d := drains[k]
		fmt.Fprintf(out, "  %-40s  %.0f, %.0f, %.0f, %.0f events/s\n", kind.name, d[release][0], d[today][0], d[today][1], d[release][1])
	}
	ratio := func(k int) float64 { return ingests[k][today].rate() / ingests[k][release].rate() }
	drainRatio := func(k int) float64 { return mean(drains[k][today]) / mean(drains[k][release]) }
	fmt.Fprintf(out, "\nratios, same run (target)\n")
	fmt.Fprintf(out, "  ingest, plain, today / release                  %5.2f  (>= 0.97)\n", ratio(0))
	fmt.Fprintf(out, "  ingest with a filter, today / release           %5.2f  (>= 0.95)\n", ratio(1))
	fmt.Fprintf(out, "  ingest, a filter and a business key, t / r      %5.2f  (the body parsed once: above the plain ratio)\n", ratio(2))
	cpuRatio := func(k int) float64 { return ingestCPU[k][today][0] / ingestCPU[k][release][0] }
	fmt.Fprintf(out, "    ingest's CPU per request, t / r              %5.2f  (the body parsed once: below the plain %.2f)\n", cpuRatio(2), cpuRatio(0))
	fmt.Fprintf(out, "  drain, raw relay, today / release               %5.2f  (>= 0.97)\n", drainRatio(0))
	fmt.Fprintf(out, "  drain with a body, today / release              %5.2f  (>= 0.95)\n\n", drainRatio(1))
	b.ReportMetric(ratio(0), "ingest_plain_today/release")
	b.ReportMetric(ratio(1), "ingest_today/release")
	b.ReportMetric(ratio(2), "ingest_keyed_today/release")
	b.ReportMetric(cpuRatio(2), "ingest_keyed_cpu_today/release")
	b.ReportMetric(drainRatio(0), "drain_relay_today/release")
	b.ReportMetric(drainRatio(1), "drain_today/release")
}

// matchIndexes gives the claim and delivery tables of dst's database the
// indexes of src's, by name (BENCH_RELEASE_INDEXES=today): the release then
// pays for the same indexes as today's build, so that what is left between
// the two is their code and statements.
func matchIndexes(b *testing.B, dst, src *build) {
	b.Helper()
	ctx := context.Background()
	defs := func(bd *build) map[string]string {
		rows, err := bd.pool.Query(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
WHERE i.tablename IN ('webhook_event_claims', 'webhook_deliveries')
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`)
		if err != nil {
			b.Fatal(err)
		}
		m := map[string]string{}
		var name, def string
		if _, err := pgx.ForEachRow(rows, []any{&name, &def}, func() error { m[name] = def; return nil }); err != nil {
			b.Fatal(err)
		}
		return m
	}
	have, want := defs(dst), defs(src)
	for name := range have {
		if _, ok := want[name]; !ok {
			if _, err := dst.pool.Exec(ctx, `DROP INDEX `+pgx.Identifier{name}.Sanitize()); err != nil {
				b.Fatal(err)
			}
		}
	}
	for name, def := range want {
		if _, ok := have[name]; !ok {
			if _, err := dst.pool.Exec(ctx, def); err != nil {
				b.Fatalf("%s: %v", def, err)
			}
		}
	}
}

// setUpBuild gives bd an empty database migrated by its own `ingest
// migrate`, a downstream and a config of its own, and starts its ingest.
func setUpBuild(b *testing.B, bd *build) {
	b.Helper()
	bd.url = dbtest.NewEmptyDB(b)
	pool, err := pgxpool.New(context.Background(), bd.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	bd.pool = pool
	bd.server = postmaster(b, pool)
	if err := pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&bd.dbName); err != nil {
		b.Fatal(err)
	}
	bd.down = newSink(b)
	bd.cfg = filepath.Join(b.TempDir(), "hookgate.yaml")
	cfg := fmt.Sprintf(releaseConfig, workerConcurrency(), releaseFilter, bd.down.URL, shipmentBody)
	if err := os.WriteFile(bd.cfg, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	migrate := exec.Command(filepath.Join(bd.dir, "ingest"), "migrate", "--config", bd.cfg)
	migrate.Env = append(os.Environ(), bd.env()...)
	if out, err := migrate.CombinedOutput(); err != nil {
		b.Fatalf("%s: ingest migrate: %v\n%s", bd.name, err, out)
	}
	bd.ingest = startBuild(b, bd, "ingest")
}

// startBuild starts bd's ingest or worker with its config on a free
// address and waits until it is healthy. What it writes goes nowhere but
// its first lines, which are shown should it fail to start.
func startBuild(b *testing.B, bd *build, name string) *process {
	b.Helper()
	addr := proctest.FreeAddr(b)
	cmd := exec.Command(filepath.Join(bd.dir, name), "--config", bd.cfg, "--listen", addr)
	cmd.Env = append(os.Environ(), bd.env()...)
	head := &headWriter{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = head, head
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1), base: "http://" + addr}
	go func() { p.done <- cmd.Wait() }()
	b.Cleanup(func() {
		p.stop(b)
		if b.Failed() {
			b.Logf("%s %s, its first output:\n%s", bd.name, name, head)
		}
	})
	proctest.WaitHealthy(b, p.base+"/healthz", p.done)
	return p
}

// headWriter keeps the first max bytes written to it and drops the rest.
type headWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// buildRevision builds ingest and worker as they were at rev, from `git
// archive` of the repository's history, and returns their directory.
func buildRevision(b *testing.B, rev string) string {
	b.Helper()
	src := b.TempDir()
	archive := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", rev, src)
	archive.Dir = filepath.Join("..", "..")
	if out, err := archive.CombinedOutput(); err != nil {
		b.Fatalf("extracting %s (BENCH_RELEASE; this needs the repository's git history): %v\n%s", rev, err, out)
	}
	return buildTree(b, src)
}

// buildTree builds ingest and worker from the module at src, both builds
// alike (no build tags), and returns their directory.
func buildTree(b *testing.B, src string) string {
	b.Helper()
	dir := b.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/ingest", "./cmd/worker")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building %s: %v\n%s", src, err, out)
	}
	return dir
}

// signCheckout is checkoutPayload for id, Stripe-signed now.
func signCheckout(id string) signedEvent {
	body := checkoutPayload(id)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: benchSecret})
	return signedEvent{body: body, header: sp.Header}
}

// repeated is how many Idempotency-Keys arrived more than once.
func (s *sink) repeated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := 0
	for _, c := range s.keys {
		if c > 1 {
			k++
		}
	}
	return k
}
