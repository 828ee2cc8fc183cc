package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/pgcluster"
	"github.com/hookgate/hookgate/internal/proctest"
)

// cellStack is a system over n cells, each a throwaway cluster: provider
// pI and its route rI live in cell cI.
type cellStack struct {
	*stack
	clusters []*pgcluster.Cluster
	pools    []*pgxpool.Pool // the test's own, for its checks
}

func cellName(i int) string     { return "c" + strconv.Itoa(i) }
func cellProvider(i int) string { return "p" + strconv.Itoa(i) }
func cellRoute(i int) string    { return "r" + strconv.Itoa(i) }

// cellKey is the Idempotency-Key of event id of provider pI to route rI.
func cellKey(i int, id string) string {
	return claim.Key{Provider: cellProvider(i), EventID: id, Route: cellRoute(i)}.IdempotencyKey()
}

// newCellStack starts n clusters, writes a config with a cell on each and
// a provider and route per cell, and migrates every cell with `worker
// migrate`.
func newCellStack(t *testing.T, n int) *cellStack {
	t.Helper()
	down := newDownstream(t)
	s := &cellStack{stack: &stack{t: t, down: down}}
	var b strings.Builder
	b.WriteString("ingest: {claim_timeout: 2s}\n")
	b.WriteString("worker: {concurrency: 8, rescue_after: 5s, shutdown_timeout: 2s, reconcile_interval: 2s}\n")
	b.WriteString("cells:\n")
	s.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOOKGATE_LOG_FORMAT=text",
		"E2E_PROVIDER_SECRET=" + providerSecret,
	}
	for i := range n {
		c := dbtest.NewCluster(t)
		s.clusters = append(s.clusters, c)
		fmt.Fprintf(&b, "  - {name: %s, database_url_env: E2E_DB_%d}\n", cellName(i), i)
		s.env = append(s.env, fmt.Sprintf("E2E_DB_%d=%s&pool_max_conns=6", i, c.URL("postgres")))
	}
	b.WriteString("providers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: %s, scheme: standard-webhooks, secrets_env: [E2E_PROVIDER_SECRET], cell: %s}\n", cellProvider(i), cellName(i))
	}
	b.WriteString("routes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: %s, provider: %s, events: [order.paid], url: %s/%s, timeout: 1s, max_attempts: 25, backoff: {initial: 20ms, max: 200ms}}\n",
			cellRoute(i), cellProvider(i), down.URL, cellRoute(i))
	}
	s.cfgPath = filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(s.cfgPath, []byte(b.String()), 0o600))
	s.env = append(s.env, "HOOKGATE_CONFIG="+s.cfgPath)

	out, code := s.run("migrate")
	require.Equal(t, 0, code, out)
	for i := range n {
		require.Contains(t, out, "cell "+cellName(i)+": ", "every cell is migrated")
		pool, err := pgxpool.New(context.Background(), s.clusters[i].URL("postgres")+"&pool_max_conns=2")
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		s.pools = append(s.pools, pool)
	}
	return s
}

// workerFor starts a worker serving only the cells named (--cells), and
// waits until it is healthy.
func (s *cellStack) workerFor(cells ...string) *proc {
	s.t.Helper()
	t := s.t
	for try := 0; ; try++ {
		addr := proctest.FreeAddr(t)
		p := &proc{name: "worker " + strings.Join(cells, ","), url: "http://" + addr, out: &proctest.Buffer{}, done: make(chan struct{}),
			cmd: exec.Command(bins.worker, "--listen", addr, "--cells", strings.Join(cells, ","))}
		p.cmd.Env = s.env
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		require.NoError(t, p.cmd.Start())
		go func() {
			_ = p.cmd.Wait()
			close(p.done)
		}()
		t.Cleanup(func() {
			p.stop()
			if t.Failed() {
				t.Logf("%s (pid %d) output:\n%s", p.name, p.cmd.Process.Pid, p.out.String())
			}
		})
		err := p.waitHealthy(30 * time.Second)
		if err == nil {
			return p
		}
		if try < 3 && strings.Contains(p.out.String(), "address already in use") {
			continue
		}
		t.Fatalf("%s did not become healthy: %v\n%s", p.name, err, p.out.String())
	}
}

// postCell sends event id of provider pI once to ingest at url, signed; it
// returns the status, or 0 when no answer came.
func postCell(client *http.Client, url string, i int, id string) int {
	body := event{id: id, typ: "order.paid"}.body()
	wh, err := standardwebhooks.NewWebhook(providerSecret)
	if err != nil {
		return 0
	}
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		return 0
	}
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/"+cellProvider(i), bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// count runs a count query in cell i.
func (s *cellStack) count(i int, sql string, args ...any) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.pools[i].QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// providersIn returns the providers with claims in cell i.
func (s *cellStack) providersIn(i int) []string {
	s.t.Helper()
	rows, err := s.pools[i].Query(context.Background(), `SELECT DISTINCT provider FROM webhook_event_claims ORDER BY 1`)
	require.NoError(s.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(s.t, err)
	return out
}

// cellLoad is a steady stream of events of one provider to one ingest,
// each sent until it is answered 2xx, as a provider retries.
type cellLoad struct {
	stopping chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	acked    []string
	statuses map[int]int // answers by status
}

func startCellLoad(t *testing.T, url string, i int, prefix string) *cellLoad {
	l := &cellLoad{stopping: make(chan struct{}), statuses: map[int]int{}}
	client := &http.Client{Timeout: 10 * time.Second}
	halted := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-l.stopping:
		default:
			close(l.stopping)
		}
		close(halted)
		l.wg.Wait()
	})
	l.wg.Go(func() {
		for n := 0; ; n++ {
			id := fmt.Sprintf("%s_%05d", prefix, n)
			for {
				code := postCell(client, url, i, id)
				l.mu.Lock()
				l.statuses[code]++
				l.mu.Unlock()
				if code == http.StatusOK {
					l.mu.Lock()
					l.acked = append(l.acked, id)
					l.mu.Unlock()
					break
				}
				select {
				case <-halted:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			select {
			case <-l.stopping:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	return l
}

// snapshot returns the events acknowledged so far and the answers by status.
func (l *cellLoad) snapshot() ([]string, map[int]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := map[int]int{}
	for k, v := range l.statuses {
		st[k] = v
	}
	return append([]string(nil), l.acked...), st
}

// stop waits for the event in flight to be acknowledged, and returns every
// event acknowledged.
func (l *cellLoad) stop() []string {
	close(l.stopping)
	l.wg.Wait()
	acked, _ := l.snapshot()
	return acked
}
