package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/migrate"
)

// BenchmarkCells measures one ingest over one cell against one ingest over
// two, on two throwaway clusters of this machine (c0, c1), each phase as
// the same-run ratio to its own pgbench baseline: the per-event
// transaction (pgbenchScript) on c0 alone for one cell, on c0 and c1 at
// once (half the clients each) for two. It also reports what an accepted
// event costs ingest's and the clusters' CPU in each phase. Each phase
// sends BENCH_CELLS_EVENTS unique events (default 4000) over concurrency
// connections; with two cells they alternate between a provider in each.
// docs/scaling.md, "What cells buy", reads it.
func BenchmarkCells(b *testing.B) {
	ctx := context.Background()
	n := envInt("BENCH_CELLS_EVENTS", 4000)
	bins := buildBinaries(b)
	var urls [2]string
	var servers [2]server
	for i := range urls {
		c := dbtest.NewCluster(b)
		urls[i] = c.URL("postgres")
		pool, err := pgxpool.New(ctx, urls[i])
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		if _, err := migrate.Up(ctx, pool, discardLogger()); err != nil {
			b.Fatal(err)
		}
		servers[i] = postmaster(b, pool)
	}
	// A first pgbench run on fresh clusters is slow (their first
	// checkpoint, cold caches): warm both up before the baselines.
	pgbenchAtOnce(b, urls[:], concurrency/2)
	one := pgbenchAtOnce(b, urls[:1], concurrency)[0]
	two := pgbenchAtOnce(b, urls[:], concurrency/2)
	env := []string{"BENCH_STRIPE=" + benchSecret, "HOOKGATE_LOG_LEVEL=error", "BENCH_DB_0=" + urls[0], "BENCH_DB_1=" + urls[1]}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}

	b.ResetTimer()
	var results [2]cellsRun
	for cells := 1; cells <= 2; cells++ {
		ingest := startBinary(b, bins, "ingest", cellsConfig(b, cells), env)
		post := func(id string, i int) error {
			body := fmt.Appendf(nil, `{"id": %q, "object": "event", "type": "invoice.paid", "data": {"object": {"id": "in_%s"}}}`, id, id)
			sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: benchSecret})
			return postStripe(client, ingest.base+"/webhooks/stripe"+strconv.Itoa(i%cells), body, sp.Header)
		}
		if _, err := hammer("warm-up", 2*concurrency, func(i int) error { return post(fmt.Sprintf("evt_warm%d_%d", cells, i), i) }); err != nil {
			b.Fatal(err)
		}
		cpu0, pg0 := cpuOf(ingest.pid()), servers[0].cpu()+servers[1].cpu()
		p, err := hammer(fmt.Sprintf("%d cells", cells), n, func(i int) error { return post(fmt.Sprintf("evt_cells%d_%d", cells, i), i) })
		if err != nil {
			b.Fatal(err)
		}
		results[cells-1] = cellsRun{phase: p, ingestCPU: cpuOf(ingest.pid()) - cpu0, pgCPU: servers[0].cpu() + servers[1].cpu() - pg0,
			batch: meanBatch(b, client, ingest.base)}
		ingest.stop(b)
	}
	b.StopTimer()

	baseline := [2]float64{one, two[0] + two[1]}
	fmt.Fprintf(os.Stdout, "\ncells on this machine, %d events a phase, one ingest, %d connections\n", n, concurrency)
	fmt.Fprintf(os.Stdout, "pgbench per-event transaction: c0 alone %.0f tps; c0 and c1 at once %.0f + %.0f tps\n", one, two[0], two[1])
	for i, r := range results {
		fmt.Fprintf(os.Stdout, "%d cell(s): %7.0f events/s = %.2f of pgbench  p99 %6.1f ms  ingest %.2f + Postgres %.2f CPU-s per 1,000 events  %.1f events a claim transaction\n",
			i+1, r.rate(), r.rate()/baseline[i], ms(r.pct(0.99)), r.ingestCPU*1000/float64(r.n), r.pgCPU*1000/float64(r.n), r.batch)
		b.ReportMetric(r.rate()/baseline[i], fmt.Sprintf("cells%d_x_pgbench", i+1))
		b.ReportMetric((r.ingestCPU+r.pgCPU)*1000/float64(r.n), fmt.Sprintf("cells%d_cpu-s/1000ev", i+1))
	}
	fmt.Fprintln(os.Stdout)
}

// cellsRun is one phase of BenchmarkCells and the CPU-s it cost.
type cellsRun struct {
	phase
	ingestCPU, pgCPU float64
	batch            float64 // mean events a claim transaction, warm-up included
}

// meanBatch reads ingest's hookgate_ingest_claim_batch_size: the mean
// events a claim transaction took, over the ingest's life.
func meanBatch(b *testing.B, client *http.Client, base string) float64 {
	b.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	var sum, count float64
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "hookgate_ingest_claim_batch_size_sum":
			sum, _ = strconv.ParseFloat(f[1], 64)
		case len(f) == 2 && f[0] == "hookgate_ingest_claim_batch_size_count":
			count, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if count == 0 {
		b.Fatal("ingest reported no claim batch")
	}
	return sum / count
}

// cellsConfig writes a config with cells cells (c0, c1), provider stripeI
// in cell cI, each with a route to nowhere: no worker runs.
func cellsConfig(b *testing.B, cells int) string {
	b.Helper()
	var s strings.Builder
	s.WriteString("cells:\n")
	for i := range cells {
		fmt.Fprintf(&s, "  - {name: c%d, database_url_env: BENCH_DB_%d}\n", i, i)
	}
	s.WriteString("providers:\n")
	for i := range cells {
		fmt.Fprintf(&s, "  - {name: stripe%d, scheme: stripe, secrets_env: [BENCH_STRIPE], cell: c%d}\n", i, i)
	}
	s.WriteString("routes:\n")
	for i := range cells {
		fmt.Fprintf(&s, "  - {name: sink%d, provider: stripe%d, events: [\"invoice.*\"], url: \"http://127.0.0.1:1/sink\"}\n", i, i)
	}
	path := filepath.Join(b.TempDir(), "hookgate.yaml")
	if err := os.WriteFile(path, []byte(s.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// pgbenchAtOnce runs pgbenchScript on every URL at the same time, clients
// each, and returns each one's rate.
func pgbenchAtOnce(b *testing.B, urls []string, clients int) []float64 {
	b.Helper()
	script := filepath.Join(b.TempDir(), "claim.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o600); err != nil {
		b.Fatal(err)
	}
	secs := strconv.Itoa(envInt("BENCH_PGBENCH_SECONDS", 10))
	tps := make([]float64, len(urls))
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			out, err := exec.Command("pgbench", "-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", "2", "-T", secs, "-f", script, u).CombinedOutput()
			m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
			if err != nil || m == nil {
				errs[i] = fmt.Errorf("pgbench on cluster %d: %v\n%s", i, err, out)
				return
			}
			tps[i], _ = strconv.ParseFloat(string(m[1]), 64)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return tps
}
