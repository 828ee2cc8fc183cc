package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// The lab's designs, by the name --design takes.
const (
	designLookup   = "lookup"
	designSeen     = "seen-flag"
	designLease    = "lease"
	designLeaseKey = "lease+key"
	designHookgate = "hookgate"
)

// The lab's scenarios, by the name --scenario takes.
const (
	scenarioCopies      = "copies"
	scenarioLostAck     = "lost-ack"
	scenarioCrashBefore = "crash-before"
	scenarioCrashAfter  = "crash-after"
)

// labDesignInfo names a design for the table.
type labDesignInfo struct {
	name  string
	title string
}

// labDesigns lists the designs in the table's order.
var labDesigns = []labDesignInfo{
	{designLookup, "1. lookup, effect, insert"},
	{designSeen, "2. atomic claim (seen flag)"},
	{designLease, "3. claim + lease recovery"},
	{designLeaseKey, "4. claim + lease + downstream key"},
	{designHookgate, "5. hookgate (ingest + worker)"},
}

// labScenarioInfo names a scenario for the table.
type labScenarioInfo struct {
	name  string
	title string
}

// labScenarios lists the scenarios in the table's order.
var labScenarios = []labScenarioInfo{
	{scenarioCopies, "concurrent copies"},
	{scenarioLostAck, "retry after a lost ack"},
	{scenarioCrashBefore, "crash before the effect"},
	{scenarioCrashAfter, "crash after the effect"},
}

// labWait bounds each wait of a cell: for the downstream to see the call to
// hold, and for hookgate to finish an event after its worker's crash (River
// rescues the job after rescue_after, once a new worker leads).
const labWait = 90 * time.Second

// labResult is one cell of the table: what was measured for one design in
// one scenario.
type labResult struct {
	design, scenario string
	copies           int // copies of the event sent at once
	tally            labTally
	acked            bool // the provider had a 2xx for the event in the end
	claimed          bool // the design's own record holds the event
	completed        bool // the design's own record says it is done
	interrupted      bool // a process was killed, or an ack lost, during the event
	duplicates       int  // side effects beyond the first
	lost             int  // 1 when the event was acked or claimed and never effected
	recovered        int  // 1 when an interrupted event was effected, acked and completed after all
	failure          string
}

// measure derives the counts from what was observed.
func (r *labResult) measure() {
	r.duplicates = max(0, r.tally.effects-1)
	if r.tally.effects == 0 && (r.acked || r.claimed) {
		r.lost = 1
	}
	if r.interrupted && r.tally.effects > 0 && r.acked && r.completed {
		r.recovered = 1
	}
}

// labTarget is a design under test: where the provider sends, how it is
// crashed and brought back, and what its own records say of an event.
type labTarget interface {
	// url is where the provider posts events.
	url() string
	// crash kills the process that holds the trapped call, with SIGKILL.
	crash() error
	// restart starts again what crash killed, as a supervisor would.
	restart(ctx context.Context) error
	// settle waits for the design's own recovery to end, and reports what
	// its records say of the event.
	settle(ctx context.Context, eventID string) (claimed, completed bool, err error)
	// close stops what the target started.
	close() error
}

// labCell runs one scenario against a started target.
func (l *labRun) labCell(ctx context.Context, t labTarget, design, scenario string) labResult {
	r := labResult{design: design, scenario: scenario, copies: 1}
	ev, err := l.provider.newEvent(scenario)
	if err != nil {
		r.failure = err.Error()
		return r
	}
	var tr *trap
	switch scenario {
	case scenarioCopies:
		r.copies = l.copies
	case scenarioLostAck:
		r.interrupted = true
	case scenarioCrashBefore:
		tr = l.down.arm(ev.id, trapBefore)
	case scenarioCrashAfter:
		tr = l.down.arm(ev.id, trapAfter)
	}

	sent := make([]labSent, r.copies)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range r.copies {
		wg.Go(func() {
			<-start
			sent[i] = l.provider.deliver(ctx, t.url(), ev, scenario == scenarioLostAck)
		})
	}
	close(start)
	if tr != nil {
		r.failure = l.crashAtTrap(ctx, t, tr)
		r.interrupted = r.failure == ""
	}
	wg.Wait()
	for _, s := range sent {
		r.acked = r.acked || s.acked
	}
	claimed, completed, err := t.settle(ctx, ev.id)
	if err != nil && r.failure == "" {
		r.failure = err.Error()
	}
	r.claimed, r.completed = claimed, completed
	r.tally = l.down.tally(ev.id)
	r.measure()
	return r
}

// crashAtTrap waits until the downstream holds the trapped call, kills the
// target there, lets the call go, and restarts the target. It returns what
// went wrong, or "".
func (l *labRun) crashAtTrap(ctx context.Context, t labTarget, tr *trap) string {
	defer close(tr.release)
	select {
	case <-tr.arrived:
	case <-time.After(labWait):
		return fmt.Sprintf("the design did not call the downstream within %s", labWait)
	case <-ctx.Done():
		return ctx.Err().Error()
	}
	if err := t.crash(); err != nil {
		return err.Error()
	}
	if err := t.restart(ctx); err != nil {
		return err.Error()
	}
	return ""
}

// labProgress prints a line as each cell starts and ends: how many are
// done, the outcome of the one that ended, and which still run.
type labProgress struct {
	mu      sync.Mutex
	con     *devlocal.Console
	total   int
	done    int
	running []string
}

func (p *labProgress) started(cell string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = append(p.running, cell)
	p.con.Printf("lab", "%d/%d cells done; started %s%s", p.done, p.total, cell, p.others(cell))
}

func (p *labProgress) finished(cell, outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.running = slices.DeleteFunc(p.running, func(s string) bool { return s == cell })
	p.con.Printf("lab", "%d/%d cells done; %s: %s%s", p.done, p.total, cell, outcome, p.others(cell))
}

// others names the cells running besides cell.
func (p *labProgress) others(cell string) string {
	var others []string
	for _, c := range p.running {
		if c != cell {
			others = append(others, c)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return " (still running: " + strings.Join(others, ", ") + ")"
}

// runColumn runs the scenarios against one design, each cell with a target
// newTarget starts, or all with one target when shared.
func (l *labRun) runColumn(ctx context.Context, design string, scenarios []string, newTarget func(context.Context) (labTarget, error), shared bool) (results []labResult, err error) {
	var t labTarget
	defer func() {
		if t != nil {
			err = errors.Join(err, t.close())
		}
	}()
	for _, s := range scenarios {
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		cell := design + " × " + s
		l.progress.started(cell)
		if t == nil {
			if t, err = newTarget(ctx); err != nil {
				return results, fmt.Errorf("starting %s: %w", design, err)
			}
		}
		r := l.labCell(ctx, t, design, s)
		results = append(results, r)
		if !shared {
			cerr := t.close()
			t = nil
			if cerr != nil && r.failure == "" {
				results[len(results)-1].failure = cerr.Error()
			}
		}
		l.progress.finished(cell, labCellText(results[len(results)-1]))
	}
	return results, err
}
