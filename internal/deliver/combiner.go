package deliver

import (
	"fmt"
	"slices"
	"sync"
)

// combiner runs calls that arrive together as one batch: a hundred jobs
// loading their deliveries, or ending, at the same moment cost one query or
// one commit rather than a hundred.
//
// It needs no goroutine of its own. The first caller to find no batch in
// flight leads: it takes what is pending (up to max), runs it, hands the
// results out, and passes the lead to the oldest caller still waiting, so
// no caller works for others for longer than one batch.
type combiner[In, Out any] struct {
	max int
	// run does a batch; it returns one Out per In, or an error for all.
	// When a batch of several fails (or panics), each of its calls is run
	// again on its own, so one bad call cannot sink the others.
	run func(batch []In) ([]Out, error)
	// observe, if set, is told each batch's size.
	observe func(n int)

	mu      sync.Mutex
	busy    bool
	pending []*call[In, Out]
}

// call is one caller waiting for its batch.
type call[In, Out any] struct {
	in  In
	msg chan callMsg[Out] // a result, or the lead
}

type callMsg[Out any] struct {
	lead bool
	out  Out
	err  error
}

// do runs in, batched with whatever else is pending, and returns its result.
func (c *combiner[In, Out]) do(in In) (Out, error) {
	me := &call[In, Out]{in: in, msg: make(chan callMsg[Out], 1)}
	c.mu.Lock()
	c.pending = append(c.pending, me)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()
	if lead {
		c.lead()
	}
	for {
		m := <-me.msg
		if m.lead {
			c.lead()
			continue
		}
		return m.out, m.err
	}
}

// lead runs one batch and passes the lead on.
func (c *combiner[In, Out]) lead() {
	c.mu.Lock()
	n := min(len(c.pending), c.max)
	batch := slices.Clone(c.pending[:n])
	c.pending = slices.Delete(c.pending, 0, n)
	c.mu.Unlock()

	if c.observe != nil {
		c.observe(len(batch))
	}
	ins := make([]In, len(batch))
	for i, b := range batch {
		ins[i] = b.in
	}
	outs, err := c.safeRun(ins)
	errs := make([]error, len(batch))
	if err != nil {
		outs = make([]Out, len(batch))
		for i := range errs {
			errs[i] = err
		}
		if len(batch) > 1 {
			for i := range batch {
				o, err := c.safeRun(ins[i : i+1])
				if err == nil {
					outs[i] = o[0]
				}
				errs[i] = err
			}
		}
	}
	for i, b := range batch {
		b.msg <- callMsg[Out]{out: outs[i], err: errs[i]}
	}

	c.mu.Lock()
	if len(c.pending) == 0 {
		c.busy = false
		c.mu.Unlock()
		return
	}
	next := c.pending[0]
	c.mu.Unlock()
	next.msg <- callMsg[Out]{lead: true}
}

// safeRun is run with a panic turned into an error: the callers waiting on
// a batch, and every later call, must not hang on a leader that never
// reports back.
func (c *combiner[In, Out]) safeRun(batch []In) (outs []Out, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("a batch of %d panicked: %v", len(batch), p)
		}
	}()
	outs, err = c.run(batch)
	if err == nil && len(outs) != len(batch) {
		err = fmt.Errorf("a batch of %d gave %d results", len(batch), len(outs))
	}
	return outs, err
}
