package n8ncheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookgate/hookgate/internal/claim"
)

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
	c.con.Printf("n8n-check", "n8n stopped; sent %d events; waiting until each delivery has been attempted", n)
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

// restartOutcome counts what became of the deliveries of ids on route,
// whose workflow's webhook is at path.
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

// effectsText is the effects cell of a restart row.
func (o restartOutcome) effectsText() string {
	s := fmt.Sprintf("%d (of %d calls)", o.effects, o.calls)
	if len(o.repeated) > 0 {
		s += fmt.Sprintf("; %d key(s) called twice or more", len(o.repeated))
	}
	return s
}

// String is the hookgate cell of a restart row.
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

// restart stops n8n, sends events while it is down and starts it again,
// on routes with and without `retry_statuses: [404]` and with docs/n8n.md's
// success setting; then once more with a route paused across the restart,
// as docs/n8n.md describes for a planned one.
func (c *n8nChecker) restart(ctx context.Context) ([]n8nRow, error) {
	const events = 10
	if err := c.n8n.stop(); err != nil {
		c.con.Printf("n8n-check", "%v", err)
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
		c.con.Printf("n8n-check", "%v", err)
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
