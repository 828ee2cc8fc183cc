package n8ncheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/hookgate/hookgate/internal/claim"
)

// duplicates sends one event as concurrent copies: ingest should accept
// one, and n8n run its workflow once.
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

// failing delivers to a workflow whose API call fails twice: hookgate
// should retry until the third execution succeeds, the API performing its
// effect once.
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

// respondNode is the pitfall docs/n8n.md warns of: the workflow's Respond
// to Webhook node comes after an API call that fails, yet n8n answers 200
// with an empty body, so hookgate completes the delivery on its first
// attempt and no effect happens.
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

// slow delivers to a 4 s workflow on two routes: with a 3s timeout every
// attempt times out, with 15s the first succeeds.
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
