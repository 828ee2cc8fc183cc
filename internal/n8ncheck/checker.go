package n8ncheck

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/devlocal"
)

// n8nChecker runs the scenarios.
type n8nChecker struct {
	con        *devlocal.Console
	rec        *recorder
	n8n        *n8nProc
	store      *claim.Store
	n8nDB      *pgxpool.Pool
	ingest     string
	secret     string
	token      string
	claimsShow string
	nodeV      string
	// workerBin and hgEnv run `worker claims show`.
	workerBin string
	hgEnv     []string
}

// nodeVersion is the Node.js version the check ran n8n on, for the
// report; node is asked once.
func (c *n8nChecker) nodeVersion() string {
	if c.nodeV == "" {
		out, _ := exec.Command("node", "--version").Output()
		c.nodeV = strings.TrimSpace(string(out))
	}
	return c.nodeV
}

// run runs every scenario, in order, and returns their rows. A scenario
// that cannot be run at all (a timeout waiting for it) is a failed row.
func (c *n8nChecker) run(ctx context.Context) []n8nRow {
	var rows []n8nRow
	for _, s := range []func(context.Context) ([]n8nRow, error){
		c.duplicates, c.failing, c.respondNode, c.respondSuccess, c.slow, c.restart, c.workedExample,
	} {
		got, err := s(ctx)
		if err != nil {
			c.con.Printf("n8n-check", "%v", err)
			got = append(got, n8nRow{scenario: "(scenario could not finish)", hookgate: err.Error(), verdict: verdictFailed})
		}
		rows = append(rows, got...)
		if ctx.Err() != nil {
			break
		}
	}
	return rows
}

// send posts a Stripe-signed event and returns ingest's status and whether
// it called the event a duplicate.
func (c *n8nChecker) send(ctx context.Context, id, typ string, object map[string]any) (int, bool, error) {
	body, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "type": typ, "created": time.Now().Unix(), "livemode": false,
		"data": map[string]any{"object": object},
	})
	if err != nil {
		return 0, false, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(c.secret))
	mac.Write([]byte(ts + "." + string(body)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.ingest, bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("sending %s: %w", id, err)
	}
	defer resp.Body.Close()
	var ack struct {
		Duplicate bool `json:"duplicate"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&ack)
	return resp.StatusCode, ack.Duplicate, nil
}

// settled waits until event id's claim is no longer processing, and
// returns its deliveries by route.
func (c *n8nChecker) settled(ctx context.Context, id string) (claim.Record, map[string]claim.Delivery, error) {
	var (
		cl  claim.Record
		ds  []claim.Delivery
		err error
	)
	perr := poll(ctx, n8nCheckTimeout, func() bool {
		cl, ds, err = c.store.Get(ctx, "stripe", id)
		return err == nil && cl.Status != claim.Processing
	})
	if perr != nil {
		return cl, nil, fmt.Errorf("claim %s did not settle: %w (last: %v)", id, perr, err)
	}
	m := map[string]claim.Delivery{}
	for _, d := range ds {
		m[d.Route] = d
	}
	return cl, m, nil
}

// executions waits until no execution of workflow is still running, and
// counts its executions by status, from n8n's own table.
func (c *n8nChecker) executions(ctx context.Context, workflow string) (map[string]int, error) {
	counts := map[string]int{}
	var qerr error
	perr := poll(ctx, n8nCheckTimeout, func() bool {
		clear(counts)
		rows, err := c.n8nDB.Query(ctx, `SELECT status, count(*) FROM execution_entity WHERE "workflowId" = $1 GROUP BY status`, workflow)
		if err != nil {
			qerr = err
			return false
		}
		var status string
		var n int
		_, qerr = pgx.ForEachRow(rows, []any{&status, &n}, func() error { counts[status] = n; return nil })
		return qerr == nil && counts["running"]+counts["new"]+counts["waiting"] == 0
	})
	if perr != nil {
		return nil, fmt.Errorf("executions of workflow %s did not finish: %w (last: %v)", workflow, perr, qerr)
	}
	return counts, nil
}

// wfID is the id of the check's workflow whose webhook is at path, as
// n8n's execution_entity records it; "" when there is none.
func wfID(path string) string {
	for _, w := range checkWorkflows() {
		if w.path == path {
			return w.id
		}
	}
	return ""
}

// worker runs the worker binary with args, as an operator would.
func (c *n8nChecker) worker(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.workerBin, args...)
	cmd.Env = c.hgEnv
	return cmd.CombinedOutput()
}

// poll calls cond every 200ms until it holds, ctx ends or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// cut shortens s to n bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// runScenarios connects to hookgate's and n8n's databases, where the
// scenarios read claims and executions, and runs every scenario.
func (r *n8nCheckRun) runScenarios(ctx context.Context) (*n8nChecker, []n8nRow, error) {
	hgPool, err := pgxpool.New(ctx, r.hgURL)
	if err != nil {
		return nil, nil, err
	}
	r.onExit(func(err error) error {
		hgPool.Close()
		return err
	})
	n8nPool, err := pgxpool.New(ctx, r.n8nURL)
	if err != nil {
		return nil, nil, err
	}
	r.onExit(func(err error) error {
		n8nPool.Close()
		return err
	})
	c := &n8nChecker{
		con: r.con, rec: r.rec, n8n: r.n8n, store: claim.NewStore(hgPool, nil, nil), n8nDB: n8nPool,
		ingest: "http://" + r.ingestAddr + "/webhooks/stripe", secret: r.secrets["STRIPE_WEBHOOK_SECRET"],
		token: r.secrets["N8N_WEBHOOK_TOKEN"], workerBin: r.workerBin, hgEnv: r.hgEnv,
	}
	return c, c.run(ctx), nil
}
