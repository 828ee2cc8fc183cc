//go:build soak

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/pgcluster"
)

// The soak runs only with the soak build tag (make soak), never in make
// test: it takes SOAK_DURATION (default 10m) plus the settle time.

// stripeSoakSecret signs the soak's Stripe provider; Stripe uses it as is.
const stripeSoakSecret = "whsec_soak_stripe_secret"

// soakSettle bounds how long, after the load stops, every claim may take to
// be delivered.
const soakSettle = 3 * time.Minute

// soakScheme is one provider of the soak: its route and how to sign.
type soakScheme struct {
	provider, route, typ string
	request              func(url, id string) (*http.Request, error)
}

// TestSoak runs steady signed load across every scheme, with duplicate
// copies and storms, for SOAK_DURATION, injecting one fault every
// SOAK_FAULT_INTERVAL (default 1m) in turn: Postgres stopped fast, the
// postmaster SIGKILLed, a failover to the synchronous standby, the worker
// SIGKILLed, ingest SIGTERMed, the downstream answering 503 for a while, a
// paused route. Then it requires the failover test's invariants (every
// event answered 2xx is a claim, delivered, one effect per key, no
// Hookgate-Attempt sent twice), no claim left processing past the settle
// time, and flat memory, goroutines and connections; it prints a summary.
func TestSoak(t *testing.T) {
	duration := envDuration(t, "SOAK_DURATION", 10*time.Minute)
	every := envDuration(t, "SOAK_FAULT_INTERVAL", time.Minute)
	ctx := context.Background()

	primary, standby := dbtest.NewReplicated(t, dbtest.Synchronous)
	pg := &soakPair{t: t, primary: primary, standby: standby}
	s, schemes := newSoakStack(t, primary, standby)
	sys := &soakSystem{s: s, ingest: s.ingest(), worker: s.worker()}
	t.Cleanup(func() { sys.mu.Lock(); defer sys.mu.Unlock(); sys.ingest.stop(); sys.worker.stop() })

	l := &soakLoad{sys: sys, schemes: schemes, acked: map[string]string{}, halted: make(chan struct{}), stopping: make(chan struct{})}
	t.Cleanup(l.halt)
	for i := range 4 {
		l.wg.Go(func() { l.run(i) })
	}

	start := time.Now()
	var samples []soakSample
	sample := func() { samples = append(samples, sys.sample(t, pg.current())) }
	faults := []soakFault{
		{"Postgres stopped fast (5 s)", func() { pg.stopFast(ctx) }},
		{"postmaster SIGKILL, restarted", func() { pg.killRestart(ctx) }},
		{"failover to the synchronous standby", func() { pg.failover(ctx) }},
		{"worker SIGKILL, started again", sys.killWorker},
		{"ingest SIGTERM, started again", sys.restartIngest},
		{"downstream answers 503 (20 s)", func() { sys.unavailable(schemes, 20*time.Second) }},
		{"route paused (20 s)", func() { sys.pause(t, schemes[0].route, 20*time.Second) }},
	}
	var done []string
	next := start.Add(every)
	for time.Since(start) < duration {
		sample()
		if time.Now().After(next) {
			f := faults[len(done)%len(faults)]
			t.Logf("soak %s: %s", time.Since(start).Round(time.Second), f.name)
			f.run()
			done = append(done, f.name)
			next = next.Add(every)
		}
		time.Sleep(5 * time.Second)
	}
	sample()
	l.stop(t)
	loadStopped := time.Now()

	// Settle: every claim delivered, within soakSettle.
	conn, err := pgx.Connect(ctx, pg.current().URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	processing := -1
	for time.Since(loadStopped) < soakSettle {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM webhook_event_claims WHERE status = 'processing'`).Scan(&processing); err == nil && processing == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	settled := time.Since(loadStopped)
	sample()
	require.Zero(t, processing, "no claim left processing %s after the load stopped", soakSettle)

	claims := map[string]string{}
	rows, err := conn.Query(ctx, `SELECT provider || '/' || event_id, status FROM webhook_event_claims`)
	require.NoError(t, err)
	for rows.Next() {
		var k, st string
		require.NoError(t, rows.Scan(&k, &st))
		claims[k] = st
	}
	require.NoError(t, rows.Err())

	var lost, notDone, wrongEffects, repeated []string
	for k, route := range l.acked {
		if st, ok := claims[k]; !ok {
			lost = append(lost, k)
		} else if st != "completed" {
			notDone = append(notDone, k+" "+st)
		}
		p, id, _ := strings.Cut(k, "/")
		key := claim.Key{Provider: p, EventID: id, Route: route}.IdempotencyKey()
		if n := s.down.effectsOf(key); n != 1 {
			wrongEffects = append(wrongEffects, fmt.Sprintf("%s: %d", k, n))
		}
		seen := map[string]bool{}
		for _, a := range s.down.attempts(key) {
			if seen[a] {
				repeated = append(repeated, k)
				break
			}
			seen[a] = true
		}
	}

	first, last := samples[min(2, len(samples)-1)], samples[len(samples)-1]
	var peak soakSample
	for _, sm := range samples {
		peak.ingestRSS, peak.workerRSS = max(peak.ingestRSS, sm.ingestRSS), max(peak.workerRSS, sm.workerRSS)
		peak.ingestGoroutines, peak.workerGoroutines = max(peak.ingestGoroutines, sm.ingestGoroutines), max(peak.workerGoroutines, sm.workerGoroutines)
		peak.conns = max(peak.conns, sm.conns)
	}
	maxConns := peak.conns
	l.mu.Lock()
	summary := [][2]string{
		{"duration (load)", loadStopped.Sub(start).Round(time.Second).String()},
		{"fault interval", every.String()},
		{"faults injected", strconv.Itoa(len(done))},
		{"events acknowledged (distinct)", strconv.Itoa(len(l.acked))},
		{"requests sent", strconv.Itoa(l.sent)},
		{"duplicate copies acknowledged as duplicates", strconv.Itoa(l.duplicates)},
		{"storms (20 copies at once)", strconv.Itoa(l.storms)},
		{"answers other than 2xx (resent)", strconv.Itoa(l.refused)},
		{"acknowledged but no claim", strconv.Itoa(len(lost))},
		{"claims not completed after settling", strconv.Itoa(len(notDone))},
		{"keys without exactly one effect", strconv.Itoa(len(wrongEffects))},
		{"deliveries with a Hookgate-Attempt sent twice", strconv.Itoa(len(repeated))},
		{"settle time after the load stopped", settled.Round(time.Second).String()},
		{"samples (every 5 s between faults)", strconv.Itoa(len(samples))},
		{"ingest RSS MiB: early → end (peak)", fmt.Sprintf("%.0f → %.0f (%.0f)", first.ingestRSS, last.ingestRSS, peak.ingestRSS)},
		{"worker RSS MiB: early → end (peak)", fmt.Sprintf("%.0f → %.0f (%.0f)", first.workerRSS, last.workerRSS, peak.workerRSS)},
		{"ingest goroutines: early → end (peak)", fmt.Sprintf("%d → %d (%d)", first.ingestGoroutines, last.ingestGoroutines, peak.ingestGoroutines)},
		{"worker goroutines: early → end (peak)", fmt.Sprintf("%d → %d (%d)", first.workerGoroutines, last.workerGoroutines, peak.workerGoroutines)},
		{"database connections: early → end (peak)", fmt.Sprintf("%d → %d (%d)", first.conns, last.conns, maxConns)},
	}
	l.mu.Unlock()
	var b strings.Builder
	b.WriteString("\n| measure | value |\n|---|---|\n")
	for _, r := range summary {
		fmt.Fprintf(&b, "| %s | %s |\n", r[0], r[1])
	}
	b.WriteString("\nfaults, in order: " + strings.Join(done, "; ") + "\n")
	t.Log(b.String())

	require.Empty(t, lost, "every event acknowledged with 2xx is a claim")
	require.Empty(t, notDone, "every claim is delivered")
	require.Empty(t, wrongEffects, "one effect per key")
	require.Empty(t, repeated, "no Hookgate-Attempt sent twice for one delivery")
	// Flat: the processes at the end (after restarts and idle) hold no more
	// than early ones under load, with room for the runtime's own growth.
	require.Less(t, last.ingestRSS, 2*first.ingestRSS+32, "ingest memory is flat")
	require.Less(t, last.workerRSS, 2*first.workerRSS+32, "worker memory is flat")
	require.Less(t, last.ingestGoroutines, 2*first.ingestGoroutines+20, "ingest goroutines are flat")
	require.Less(t, last.workerGoroutines, 2*first.workerGoroutines+20, "worker goroutines are flat")
	require.LessOrEqual(t, maxConns, 3*6+4, "connections stay within the pools (6 each) and the test's own")
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "%s", name)
	return d
}

type soakFault struct {
	name string
	run  func()
}

// newSoakStack is a stack with a route per scheme (Standard Webhooks,
// GitHub, Shopify, Stripe), retrying for long enough to outlast every
// fault, on the pair through a two-host DATABASE_URL.
func newSoakStack(t *testing.T, primary, standby *pgcluster.Cluster) (*stack, []soakScheme) {
	t.Helper()
	long := func(r route) route {
		r.maxAttempts, r.initial, r.max = 200, 20*time.Millisecond, 2*time.Second
		return r
	}
	s := newStack(t, []route{
		long(route{name: "sw-fulfil", events: []string{"order.paid"}}),
		long(route{name: "gh-push", provider: githubProvider, events: []string{"push"}}),
		long(route{name: "shop-orders", provider: shopifyProvider, events: []string{"orders/*"}}),
		long(route{name: "stripe-paid", provider: "stripe", events: []string{"invoice.paid"}}),
	}, setting{"rescue_after", "5s"}, setting{"reconcile_interval", "5s"}, setting{"ingest.claim_timeout", "2s"})
	cfg, err := os.ReadFile(s.cfgPath)
	require.NoError(t, err)
	cfg = bytes.Replace(cfg, []byte("routes:\n"), []byte("  - name: stripe\n    scheme: stripe\n    secrets_env: [E2E_STRIPE_SECRET]\nroutes:\n"), 1)
	require.NoError(t, os.WriteFile(s.cfgPath, cfg, 0o600))
	s.env = append(s.env, "E2E_STRIPE_SECRET="+stripeSoakSecret)
	s.setDatabase(fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&pool_max_conns=6",
		primary.Port, standby.Port))
	out, code := s.run("migrate")
	require.Equal(t, 0, code, out)

	jsonBody := func(id, typ string) []byte {
		b, _ := json.Marshal(map[string]any{"id": id, "type": typ, "data": map[string]any{"id": "obj_" + id, "object": map[string]any{"id": "obj_" + id}}})
		return b
	}
	req := func(url, provider string, body []byte, h http.Header) (*http.Request, error) {
		r, err := http.NewRequest(http.MethodPost, url+"/webhooks/"+provider, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r.Header = h
		return r, nil
	}
	return s, []soakScheme{
		{provider: provider, route: "sw-fulfil", typ: "order.paid", request: func(url, id string) (*http.Request, error) {
			body := event{id: id, typ: "order.paid"}.body()
			wh, _ := standardwebhooks.NewWebhook(providerSecret)
			now := time.Now()
			sig, err := wh.Sign(id, now, body)
			if err != nil {
				return nil, err
			}
			return req(url, provider, body, http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id},
				"Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}})
		}},
		{provider: githubProvider, route: "gh-push", typ: "push", request: func(url, id string) (*http.Request, error) {
			body := jsonBody(id, "push")
			return req(url, githubProvider, body, githubHeader(id, "push", body))
		}},
		{provider: shopifyProvider, route: "shop-orders", typ: "orders/create", request: func(url, id string) (*http.Request, error) {
			body := jsonBody(id, "orders/create")
			return req(url, shopifyProvider, body, shopifyHeader(id, "orders/create", body))
		}},
		{provider: "stripe", route: "stripe-paid", typ: "invoice.paid", request: func(url, id string) (*http.Request, error) {
			body := jsonBody(id, "invoice.paid")
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			m := hmac.New(sha256.New, []byte(stripeSoakSecret))
			m.Write([]byte(ts + "." + string(body)))
			return req(url, "stripe", body, http.Header{"Content-Type": {"application/json"},
				"Stripe-Signature": {"t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))}})
		}},
	}
}

// soakSystem holds the running processes, which faults replace.
type soakSystem struct {
	s              *stack
	mu             sync.Mutex
	ingest, worker *proc
}

func (y *soakSystem) ingestURL() string {
	y.mu.Lock()
	defer y.mu.Unlock()
	return y.ingest.url
}

func (y *soakSystem) killWorker() {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.worker.kill()
	y.worker = y.s.worker()
}

func (y *soakSystem) restartIngest() {
	y.mu.Lock()
	old := y.ingest
	y.mu.Unlock()
	old.stop()
	p := y.s.ingest()
	y.mu.Lock()
	y.ingest = p
	y.mu.Unlock()
}

func (y *soakSystem) unavailable(schemes []soakScheme, d time.Duration) {
	for _, sc := range schemes {
		y.s.down.set(sc.route, answers(http.StatusServiceUnavailable))
	}
	time.Sleep(d)
	for _, sc := range schemes {
		y.s.down.set(sc.route, nil)
	}
}

func (y *soakSystem) pause(t *testing.T, route string, d time.Duration) {
	out, code := y.s.run("routes", "pause", route)
	require.Equal(t, 0, code, out)
	time.Sleep(d)
	// The database may be busy with a fault's aftermath: retry.
	require.Eventually(t, func() bool {
		_, code := y.s.run("routes", "resume", route)
		return code == 0
	}, time.Minute, time.Second, "resuming %s", route)
}

// soakSample is one reading of the processes and the database.
type soakSample struct {
	ingestRSS, workerRSS               float64 // MiB
	ingestGoroutines, workerGoroutines int
	conns                              int
}

func (y *soakSystem) sample(t *testing.T, on *pgcluster.Cluster) soakSample {
	y.mu.Lock()
	ingest, worker := y.ingest, y.worker
	y.mu.Unlock()
	var sm soakSample
	sm.ingestRSS, sm.ingestGoroutines = metrics(ingest.url + "/metrics")
	sm.workerRSS, sm.workerGoroutines = metrics(worker.url + "/metrics")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, on.URL("postgres")); err == nil {
		_ = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&sm.conns)
		conn.Close(ctx)
	}
	return sm
}

// metrics reads process_resident_memory_bytes (in MiB) and go_goroutines.
func metrics(url string) (rss float64, goroutines int) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "process_resident_memory_bytes":
			v, _ := strconv.ParseFloat(value, 64)
			rss = v / (1 << 20)
		case "go_goroutines":
			v, _ := strconv.ParseFloat(value, 64)
			goroutines = int(v)
		}
	}
	return rss, goroutines
}

// soakPair is the primary and its synchronous standby, which a failover
// swaps; a new standby takes the lost primary's port, so the binaries' host
// list stays right.
type soakPair struct {
	t                *testing.T
	mu               sync.Mutex
	primary, standby *pgcluster.Cluster
	generation       int
}

func (p *soakPair) current() *pgcluster.Cluster {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
}

func (p *soakPair) stopFast(ctx context.Context) {
	require.NoError(p.t, p.primary.Stop(ctx))
	time.Sleep(5 * time.Second)
	require.NoError(p.t, p.primary.Restart(ctx))
}

func (p *soakPair) killRestart(ctx context.Context) {
	require.NoError(p.t, p.primary.KillPostmaster())
	require.NoError(p.t, p.primary.Restart(ctx))
}

func (p *soakPair) failover(ctx context.Context) {
	t := p.t
	old := p.primary
	require.NoError(t, old.KillPostmaster())
	require.NoError(t, p.standby.Promote(ctx))
	p.mu.Lock()
	p.primary = p.standby
	p.mu.Unlock()
	// The new primary waits for no standby until its own is streaming.
	p.exec(ctx, `ALTER SYSTEM RESET synchronous_standby_names`, `SELECT pg_reload_conf()`)
	require.NoError(t, old.Remove(ctx))
	p.generation++
	name := fmt.Sprintf("standby%d", p.generation+1)
	standby, err := p.primary.StartStandby(ctx, filepath.Join(filepath.Dir(old.Dir), name), old.Port, name, "synchronous_commit=on")
	require.NoError(t, err)
	t.Cleanup(func() { _ = standby.Remove(context.Background()) })
	p.standby = standby
	p.exec(ctx, fmt.Sprintf(`ALTER SYSTEM SET synchronous_standby_names = '%s'`, name), `SELECT pg_reload_conf()`)
}

func (p *soakPair) exec(ctx context.Context, sqls ...string) {
	conn, err := pgx.Connect(ctx, p.primary.URL("postgres"))
	require.NoError(p.t, err)
	defer conn.Close(ctx)
	for _, q := range sqls {
		_, err := conn.Exec(ctx, q)
		require.NoError(p.t, err, q)
	}
}

// soakLoad sends new events across the schemes, resends acknowledged ones
// (duplicates), and now and then a storm of copies of one event at once.
// Every event is resent until answered 2xx, as providers do.
type soakLoad struct {
	sys      *soakSystem
	schemes  []soakScheme
	wg       sync.WaitGroup
	stopping chan struct{}
	halted   chan struct{}
	haltOnce sync.Once

	mu                                sync.Mutex
	acked                             map[string]string // provider/event id → route
	ackedList                         []string
	sent, refused, duplicates, storms int
}

func (l *soakLoad) halt() { l.haltOnce.Do(func() { close(l.halted) }) }

func (l *soakLoad) stop(t *testing.T) {
	close(l.stopping)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("senders did not finish their last events")
	}
}

func (l *soakLoad) run(sender int) {
	client := &http.Client{Timeout: 15 * time.Second}
	rng := rand.New(rand.NewPCG(uint64(sender), 1))
	for n := 0; ; n++ {
		select {
		case <-l.stopping:
			return
		case <-l.halted:
			return
		case <-time.After(40 * time.Millisecond):
		}
		sc := l.schemes[(sender+n)%len(l.schemes)]
		id := fmt.Sprintf("soak_%d_%06d", sender, n)
		switch {
		case n%200 == 199:
			// A storm: 20 copies at once, as a provider retrying hard.
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() { l.deliver(client, sc, id) })
			}
			wg.Wait()
			l.mu.Lock()
			l.storms++
			l.mu.Unlock()
		case n%10 == 9 && n > 0:
			// A duplicate of an acknowledged event.
			l.mu.Lock()
			var dup string
			if len(l.ackedList) > 0 {
				dup = l.ackedList[rng.IntN(len(l.ackedList))]
			}
			l.mu.Unlock()
			if p, dupID, ok := strings.Cut(dup, "/"); ok {
				for _, o := range l.schemes {
					if o.provider == p {
						if l.deliver(client, o, dupID) {
							l.mu.Lock()
							l.duplicates++
							l.mu.Unlock()
						}
					}
				}
			}
			l.deliver(client, sc, id)
		default:
			l.deliver(client, sc, id)
		}
	}
}

// deliver sends id until it is answered 2xx and reports whether the answer
// called it a duplicate. It gives up only when halted.
func (l *soakLoad) deliver(client *http.Client, sc soakScheme, id string) (duplicate bool) {
	for {
		req, err := sc.request(l.sys.ingestURL(), id)
		if err != nil {
			panic(err)
		}
		l.mu.Lock()
		l.sent++
		l.mu.Unlock()
		resp, err := client.Do(req)
		if err == nil {
			var a struct {
				Duplicate bool `json:"duplicate"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
				k := sc.provider + "/" + id
				l.mu.Lock()
				if _, ok := l.acked[k]; !ok {
					l.acked[k] = sc.route
					l.ackedList = append(l.ackedList, k)
				}
				l.mu.Unlock()
				return a.Duplicate
			}
		}
		l.mu.Lock()
		l.refused++
		l.mu.Unlock()
		select {
		case <-l.halted:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}
