package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/claim"
)

// recorder is the APIs the check's workflows and the worked example call:
// it performs one effect per Idempotency-Key, as a downstream should.
type recorder struct {
	mu          sync.Mutex
	shipperAuth string
	log         *console                  // each call, for the log file
	calls       map[string]int            // path -> requests
	byKey       map[string]map[string]int // path -> key -> requests
	effects     map[string]int            // path -> effects
	bodies      map[string][]byte         // path -> last body
	keys        map[string]string         // path -> last key
}

func newRecorder() *recorder {
	return &recorder{calls: map[string]int{}, byKey: map[string]map[string]int{}, effects: map[string]int{},
		bodies: map[string][]byte{}, keys: map[string]string{}}
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	path, key := strings.TrimPrefix(req.URL.Path, "/"), req.Header.Get("Idempotency-Key")
	if strings.HasPrefix(path, "v1/shipments") {
		key = req.Header.Get("X-Idempotency-Key")
		if req.Header.Get("Authorization") != r.shipperAuth {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log != nil {
		r.log.printf("api", "%s key=%s from=%s", path, key, req.RemoteAddr)
	}
	r.calls[path]++
	if r.byKey[path] == nil {
		r.byKey[path] = map[string]int{}
	}
	r.byKey[path][key]++
	n := r.byKey[path][key]
	r.bodies[path], r.keys[path] = body, key
	code := http.StatusOK
	switch {
	case key == "":
		code = http.StatusBadRequest
	case path == "effect/hg-failing" && n <= 2, path == "effect/hg-respond-success" && n <= 2, path == "effect/hg-respond-node":
		code = http.StatusInternalServerError
	case path == "v1/shipments" && n == 1:
		code = http.StatusServiceUnavailable
	}
	if code/100 == 2 && n == firstSuccess(path) {
		r.effects[path]++
	}
	w.Header().Set("Content-Type", "application/json")
	if path == "v1/shipments" && code/100 == 2 {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"shp_8812","status":"created"}`)
		return
	}
	if path == labelPath && code/100 == 2 {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"tracking_number":"`+trackingNumber+`"}`)
		return
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"ok":%t}`, code/100 == 2)
}

// The worked example's second step: the label of the shipment the first
// created, and the tracking number it answers.
const (
	labelPath      = "v1/shipments/shp_8812/label"
	trackingNumber = "1Z999AA10123456784"
)

// firstSuccess is the request number of key's first 2xx at path: the
// request that performs its effect.
func firstSuccess(path string) int {
	switch {
	case path == "effect/hg-failing", path == "effect/hg-respond-success":
		return 3
	case path == "v1/shipments":
		return 2
	}
	return 1
}

func (r *recorder) stats(path string) (calls, effects int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[path], r.effects[path]
}

// callsWith counts the requests to path that carried key.
func (r *recorder) callsWith(path, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[path][key]
}

func (r *recorder) last(path string) (key string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[path], r.bodies[path]
}

// verdict says whether a scenario went as docs/n8n.md says.
type verdict int

const (
	verdictOK verdict = iota
	verdictFailed
	// verdictShown: a comparison, with nothing expected of it.
	verdictShown
)

// n8nRow is one line of the check's table.
type n8nRow struct {
	scenario, hookgate, executions, effects string
	verdict                                 verdict
}

func markdownTable(rows []n8nRow) string {
	var b strings.Builder
	b.WriteString("| scenario | hookgate | n8n executions | effects downstream | as the guide says |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		v := map[verdict]string{verdictOK: "yes", verdictFailed: "**NO**", verdictShown: "(comparison)"}[r.verdict]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.scenario, r.hookgate, r.executions, r.effects, v)
	}
	return b.String()
}

// n8nChecker runs the scenarios.
type n8nChecker struct {
	con        *console
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
			c.con.printf("n8n-check", "%v", err)
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

// total and describe summarise execution counts.
func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func describeExecutions(m map[string]int) string {
	if total(m) == 0 {
		return "0"
	}
	var parts []string
	for _, s := range []string{"success", "error", "crashed", "canceled"} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[s], s))
		}
	}
	return fmt.Sprintf("%d (%s)", total(m), strings.Join(parts, ", "))
}

func okIf(b bool) verdict {
	if b {
		return verdictOK
	}
	return verdictFailed
}

func wfID(path string) string {
	for _, w := range checkWorkflows() {
		if w.path == path {
			return w.id
		}
	}
	return ""
}

func (c *n8nChecker) duplicates(ctx context.Context) ([]n8nRow, error) {
	const id, copies = "evt_check_dup", 5
	var wg sync.WaitGroup
	dups := make([]bool, copies)
	errs := make([]error, copies)
	for i := range copies {
		wg.Go(func() {
			code, dup, err := c.send(ctx, id, "check.duplicates", map[string]any{"id": "obj_dup"})
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("ingest answered %d", code)
			}
			dups[i], errs[i] = dup, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	fresh := 0
	for _, d := range dups {
		if !d {
			fresh++
		}
	}
	cl, ds, err := c.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, err := c.executions(ctx, wfID("hg-duplicates"))
	if err != nil {
		return nil, err
	}
	d := ds["check-duplicates"]
	_, effects := c.rec.stats("effect/hg-duplicates")
	return []n8nRow{{
		scenario:   fmt.Sprintf("%d concurrent copies of one event", copies),
		hookgate:   fmt.Sprintf("%d accepted, %d duplicates; %s after %d attempt(s)", fresh, copies-fresh, d.Status, d.AttemptCount),
		executions: describeExecutions(ex), effects: strconv.Itoa(effects),
		verdict: okIf(fresh == 1 && cl.Status == claim.Completed && total(ex) == 1 && ex["success"] == 1 && effects == 1),
	}}, nil
}

func (c *n8nChecker) failing(ctx context.Context) ([]n8nRow, error) {
	const id = "evt_check_failing"
	if _, _, err := c.send(ctx, id, "check.failing", map[string]any{"id": "obj_failing"}); err != nil {
		return nil, err
	}
	cl, ds, err := c.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, err := c.executions(ctx, wfID("hg-failing"))
	if err != nil {
		return nil, err
	}
	d := ds["check-failing"]
	calls, effects := c.rec.stats("effect/hg-failing")
	return []n8nRow{{
		scenario:   "workflow whose API call fails twice (When Last Node Finishes)",
		hookgate:   fmt.Sprintf("%s after %d attempts; last error %q", d.Status, d.AttemptCount, cut(d.LastError, 60)),
		executions: describeExecutions(ex), effects: fmt.Sprintf("%d (of %d calls, one key)", effects, calls),
		verdict: okIf(cl.Status == claim.Completed && d.AttemptCount == 3 && ex["error"] == 2 && ex["success"] == 1 && effects == 1),
	}}, nil
}

func (c *n8nChecker) respondNode(ctx context.Context) ([]n8nRow, error) {
	const id = "evt_check_respond_node"
	if _, _, err := c.send(ctx, id, "check.respond-node", map[string]any{"id": "obj_respond"}); err != nil {
		return nil, err
	}
	_, ds, err := c.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, err := c.executions(ctx, wfID("hg-respond-node"))
	if err != nil {
		return nil, err
	}
	d := ds["check-respond-node"]
	_, effects := c.rec.stats("effect/hg-respond-node")
	return []n8nRow{{
		scenario:   "Respond to Webhook node after an API call that fails (the pitfall)",
		hookgate:   fmt.Sprintf("%s after %d attempt(s): n8n answered 200 with an empty body", d.Status, d.AttemptCount),
		executions: describeExecutions(ex), effects: strconv.Itoa(effects),
		verdict: okIf(d.Status == claim.DeliveryCompleted && d.AttemptCount == 1 && ex["error"] == 1 && total(ex) == 1 && effects == 0),
	}}, nil
}

// respondSuccess is the pitfall above with docs/n8n.md's setting: the
// Respond to Webhook node answers {"ok": true} and the route's success
// reads it, so the empty 200 of the two failed executions is retried.
func (c *n8nChecker) respondSuccess(ctx context.Context) ([]n8nRow, error) {
	const id = "evt_check_respond_success"
	if _, _, err := c.send(ctx, id, "check.respond-success", map[string]any{"id": "obj_respond_success"}); err != nil {
		return nil, err
	}
	_, ds, err := c.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, err := c.executions(ctx, wfID("hg-respond-success"))
	if err != nil {
		return nil, err
	}
	d := ds["check-respond-success"]
	calls, effects := c.rec.stats("effect/hg-respond-success")
	return []n8nRow{{
		scenario:   "the same, with the node answering `{\"ok\": true}` and `success: '.body.ok == true'`, the API failing twice",
		hookgate:   fmt.Sprintf("%s after %d attempts: the empty 200s did not satisfy success", d.Status, d.AttemptCount),
		executions: describeExecutions(ex), effects: fmt.Sprintf("%d (of %d calls, one key)", effects, calls),
		verdict: okIf(d.Status == claim.DeliveryCompleted && d.AttemptCount == 3 && ex["error"] == 2 && ex["success"] == 1 && effects == 1),
	}}, nil
}

func (c *n8nChecker) slow(ctx context.Context) ([]n8nRow, error) {
	const id = "evt_check_slow"
	if _, _, err := c.send(ctx, id, "check.slow", map[string]any{"id": "obj_slow"}); err != nil {
		return nil, err
	}
	_, ds, err := c.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	short, err := c.executions(ctx, wfID("hg-slow-short"))
	if err != nil {
		return nil, err
	}
	long, err := c.executions(ctx, wfID("hg-slow-long"))
	if err != nil {
		return nil, err
	}
	ds3, ds15 := ds["check-slow-short"], ds["check-slow-long"]
	sCalls, sEffects := c.rec.stats("effect/hg-slow-short")
	_, lEffects := c.rec.stats("effect/hg-slow-long")
	return []n8nRow{
		{
			scenario:   "4 s workflow, route timeout 3s, max_attempts 3",
			hookgate:   fmt.Sprintf("%s: %q", ds3.Status, cut(ds3.LastError, 70)),
			executions: describeExecutions(short), effects: fmt.Sprintf("%d (of %d calls: the workflow passes the key on)", sEffects, sCalls),
			verdict: okIf(ds3.Status == claim.DeliveryFailed && ds3.AttemptCount == 3 && total(short) == 3 && sEffects == 1 &&
				strings.HasPrefix(ds3.LastError, "attempts exhausted")),
		},
		{
			scenario:   "4 s workflow, route timeout 15s",
			hookgate:   fmt.Sprintf("%s after %d attempt(s)", ds15.Status, ds15.AttemptCount),
			executions: describeExecutions(long), effects: strconv.Itoa(lEffects),
			verdict: okIf(ds15.Status == claim.DeliveryCompleted && ds15.AttemptCount == 1 && total(long) == 1 && lEffects == 1),
		},
	}, nil
}

// restartEvents sends n events of typ while n8n is stopped, and waits
// until each delivery has been attempted or, for a paused route, queued.
func (c *n8nChecker) restartEvents(ctx context.Context, prefix, typ string, n int, attempted bool) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s_%02d", prefix, i+1)
		if _, _, err := c.send(ctx, ids[i], typ, map[string]any{"id": "obj_restart"}); err != nil {
			return nil, err
		}
	}
	if !attempted {
		return ids, nil
	}
	c.con.printf("n8n-check", "n8n stopped; sent %d events; waiting until each delivery has been attempted", n)
	err := poll(ctx, n8nCheckTimeout, func() bool {
		for _, id := range ids {
			_, ds, err := c.store.Get(ctx, "stripe", id)
			if err != nil || len(ds) == 0 {
				return false
			}
			for _, d := range ds {
				if d.AttemptCount == 0 {
					return false
				}
			}
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("the events were not attempted while n8n was down: %w", err)
	}
	return ids, nil
}

// restartOutcome is what became of one route's restart events.
type restartOutcome struct {
	completed, failed404 int
	// lost: completed, but the workflow never called the recorder with
	// the delivery's key (n8n answered 200 "starting up").
	lost           int
	executions     map[string]int
	calls, effects int
	// repeated are the keys the workflow called the API with more than once.
	repeated []string
}

// onceEach: every one of n events completed and had its one effect, the
// API deduplicating on the key; none completed on n8n's "starting up"
// answer without running. Executions and calls are shown, not required:
// n8n may run a delivery's workflow twice while it starts, and labels an
// execution that ran then "crashed" when its start-up recovery finds it
// running.
func (o restartOutcome) onceEach(n int) bool {
	return o.completed == n && o.lost == 0 && o.effects == n
}

// exactlyOnce is onceEach with one execution and one call per event.
func (o restartOutcome) exactlyOnce(n int) bool {
	return o.onceEach(n) && o.calls == n && total(o.executions) == n
}

// onceEachButStartingUp is onceEach for an unplanned restart, where
// docs/n8n.md warns that an event delivered on n8n's "starting up" answer
// is completed without running: those are counted apart, not failed.
func (o restartOutcome) onceEachButStartingUp(n int) bool {
	return o.completed == n && o.effects+o.lost == n
}

func (c *n8nChecker) restartOutcome(ctx context.Context, ids []string, route, path string) (restartOutcome, error) {
	var o restartOutcome
	for _, id := range ids {
		_, ds, err := c.settled(ctx, id)
		if err != nil {
			return o, err
		}
		d := ds[route]
		switch {
		case d.Status == claim.DeliveryCompleted:
			o.completed++
			if c.rec.callsWith("effect/"+path, claim.Key{Provider: "stripe", EventID: id, Route: route}.IdempotencyKey()) == 0 {
				o.lost++
			}
		case d.Status == claim.DeliveryFailed && strings.HasPrefix(d.LastError, "HTTP 404"):
			o.failed404++
		}
	}
	var err error
	if o.executions, err = c.executions(ctx, wfID(path)); err != nil {
		return o, err
	}
	o.calls, o.effects = c.rec.stats("effect/" + path)
	o.repeated = c.rec.repeated("effect/" + path)
	return o, nil
}

// repeated lists the keys path was called with more than once.
func (r *recorder) repeated(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, n := range r.byKey[path] {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", cut(k, 16), n))
		}
	}
	slices.Sort(out)
	return out
}

func (o restartOutcome) effectsText() string {
	s := fmt.Sprintf("%d (of %d calls)", o.effects, o.calls)
	if len(o.repeated) > 0 {
		s += fmt.Sprintf("; %d key(s) called twice or more", len(o.repeated))
	}
	return s
}

func (o restartOutcome) String() string {
	s := fmt.Sprintf("%d of %d completed", o.completed, o.completed+o.failed404)
	if o.failed404 > 0 {
		s += fmt.Sprintf(", %d failed for good on HTTP 404", o.failed404)
	}
	if o.lost > 0 {
		s += fmt.Sprintf(", %d of them completed on n8n's 200 \"starting up\" without running", o.lost)
	}
	return s
}

func (c *n8nChecker) restart(ctx context.Context) ([]n8nRow, error) {
	const events = 10
	if err := c.n8n.stop(); err != nil {
		c.con.printf("n8n-check", "%v", err)
	}
	ids, err := c.restartEvents(ctx, "evt_check_restart", "check.restart", events, true)
	if err != nil {
		return nil, err
	}
	st, err := c.n8n.start(ctx)
	if err != nil {
		return nil, err
	}
	with, err := c.restartOutcome(ctx, ids, "check-restart", "hg-restart")
	if err != nil {
		return nil, err
	}
	plain, err := c.restartOutcome(ctx, ids, "check-restart-plain", "hg-restart-plain")
	if err != nil {
		return nil, err
	}
	success, err := c.restartOutcome(ctx, ids, "check-restart-success", "hg-restart-success")
	if err != nil {
		return nil, err
	}
	rows := []n8nRow{
		{
			scenario:   fmt.Sprintf("n8n stopped, %d events sent, n8n started (it %s), `retry_statuses: [404]`", events, st),
			hookgate:   with.String(),
			executions: describeExecutions(with.executions), effects: with.effectsText(),
			verdict: okIf(with.onceEachButStartingUp(events)),
		},
		{
			scenario:   "the same events, on a route with `retry_statuses: [404]` and `success: '.body.ok == true'` (not paused)",
			hookgate:   success.String(),
			executions: describeExecutions(success.executions), effects: success.effectsText(),
			verdict: okIf(success.onceEach(events)),
		},
		{
			scenario:   "the same events, on a route without `retry_statuses`",
			hookgate:   plain.String(),
			executions: describeExecutions(plain.executions), effects: plain.effectsText(),
			verdict: verdictShown,
		},
	}

	// A planned restart: the route paused across it, resumed once n8n
	// serves its webhooks (the probe workflow answers), as docs/n8n.md
	// describes. Nothing reaches n8n while it starts.
	if out, err := c.worker(ctx, "routes", "pause", "check-restart-paused"); err != nil {
		return rows, fmt.Errorf("worker routes pause: %w: %s", err, out)
	}
	if err := c.n8n.stop(); err != nil {
		c.con.printf("n8n-check", "%v", err)
	}
	pids, err := c.restartEvents(ctx, "evt_check_paused", "check.restart-paused", events, false)
	if err != nil {
		return rows, err
	}
	if _, err := c.n8n.start(ctx); err != nil {
		return rows, err
	}
	if out, err := c.worker(ctx, "routes", "resume", "check-restart-paused"); err != nil {
		return rows, fmt.Errorf("worker routes resume: %w: %s", err, out)
	}
	paused, err := c.restartOutcome(ctx, pids, "check-restart-paused", "hg-restart-paused")
	if err != nil {
		return rows, err
	}
	return append(rows, n8nRow{
		scenario:   fmt.Sprintf("route paused, n8n restarted, %d events sent, route resumed once n8n serves its webhooks", events),
		hookgate:   paused.String(),
		executions: describeExecutions(paused.executions), effects: paused.effectsText(),
		verdict: okIf(paused.exactlyOnce(events)),
	}), nil
}

// worker runs the worker binary with args, as an operator would.
func (c *n8nChecker) worker(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.workerBin, args...)
	cmd.Env = c.hgEnv
	return cmd.CombinedOutput()
}

func (c *n8nChecker) workedExample(ctx context.Context) ([]n8nRow, error) {
	const id = "evt_1QcheckWorkedExample"
	session := map[string]any{
		"id": "cs_check_1042", "object": "checkout.session", "amount_total": 4200, "currency": "eur",
		"metadata":         map[string]string{"ship": "true", "order_id": "ord_1042"},
		"customer_details": map[string]any{"email": "ada@example.com"},
		"shipping_details": map[string]any{"name": "Ada Lovelace", "address": map[string]string{
			"line1": "12 St James's Square", "city": "London", "postal_code": "SW1Y 4JH", "country": "GB"}},
	}
	_, dup1, err := c.send(ctx, id, "checkout.session.completed", session)
	if err != nil {
		return nil, err
	}
	_, dup2, err := c.send(ctx, id, "checkout.session.completed", session) // Stripe's retry
	if err != nil {
		return nil, err
	}
	cl, ds, err := c.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, err := c.executions(ctx, wfID("checkout-paid"))
	if err != nil {
		return nil, err
	}
	ship, label, notify := ds["create-shipment"], ds["buy-label"], ds["notify-ops"]
	shipCalls, shipEffects := c.rec.stats("v1/shipments")
	labelCalls, labelEffects := c.rec.stats(labelPath)
	_, notifyEffects := c.rec.stats("effect/checkout-paid")
	key, body := c.rec.last("effect/checkout-paid")
	var told struct {
		Email    string `json:"email"`
		Order    string `json:"order"`
		Tracking string `json:"tracking"`
	}
	_ = json.Unmarshal(body, &told)
	wantKey := claim.Key{Provider: "stripe", EventID: id, Route: "notify-ops"}.IdempotencyKey()

	forged, err := c.forgedToken(ctx)
	if err != nil {
		return nil, err
	}
	out, err := c.worker(ctx, "claims", "show", "stripe", id)
	if err != nil {
		return nil, fmt.Errorf("worker claims show: %w: %s", err, out)
	}
	c.claimsShow = string(out)
	return []n8nRow{
		{
			scenario: "worked example: checkout sent twice, shipping API answers 503 then 201",
			hookgate: fmt.Sprintf("second copy duplicate: %t; create-shipment %s after %d attempts, result %s",
				!dup1 && dup2, ship.Status, ship.AttemptCount, string(ship.Result)),
			executions: "—", effects: fmt.Sprintf("%d shipment (of %d calls)", shipEffects, shipCalls),
			verdict: okIf(!dup1 && dup2 && cl.Status == claim.Completed && ship.AttemptCount == 2 &&
				string(ship.Result) == `{"id": "shp_8812"}` && shipEffects == 1),
		},
		{
			scenario:   "worked example: buy-label after create-shipment, the shipment id in its path",
			hookgate:   fmt.Sprintf("buy-label %s after %d attempt(s), result %s", label.Status, label.AttemptCount, string(label.Result)),
			executions: "—", effects: fmt.Sprintf("%d label (of %d calls)", labelEffects, labelCalls),
			verdict: okIf(label.Status == claim.DeliveryCompleted && labelEffects == 1 && labelCalls == 1 &&
				string(label.Result) == `{"tracking": "`+trackingNumber+`"}`),
		},
		{
			scenario: "worked example: notify-ops to the Header Auth workflow",
			hookgate: fmt.Sprintf("%s after %d attempt(s); the workflow saw the key: %t, email %q, tracking %q",
				notify.Status, notify.AttemptCount, key == wantKey, told.Email, told.Tracking),
			executions: describeExecutions(ex), effects: strconv.Itoa(notifyEffects),
			verdict: okIf(notify.Status == claim.DeliveryCompleted && total(ex) == 1 && ex["success"] == 1 && notifyEffects == 1 &&
				key == wantKey && told.Email == "ada@example.com" && told.Order == "ord_1042" && told.Tracking == trackingNumber),
		},
		{
			scenario: "a wrong X-Hookgate-Token, sent to the workflow directly",
			hookgate: fmt.Sprintf("n8n answered %d", forged), executions: "—", effects: "—",
			verdict: okIf(forged == http.StatusForbidden),
		},
	}, nil
}

// forgedToken posts to the worked example's workflow with a wrong token
// and returns n8n's status.
func (c *n8nChecker) forgedToken(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.n8n.base+"/webhook/checkout-paid", strings.NewReader(`{}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hookgate-Token", "not-"+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
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
