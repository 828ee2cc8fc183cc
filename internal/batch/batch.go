// Package batch runs calls that arrive together as one batch, so that a
// hundred requests claiming, or a hundred jobs ending, at the same moment
// cost one transaction rather than a hundred.
package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// DefaultTimeout is a Combiner's Timeout when none is set.
const DefaultTimeout = 10 * time.Second

// Combiner batches concurrent calls of Do and runs them with Run.
//
// There is no timer: a call that finds fewer than Concurrency batches in
// flight runs at once, in a batch of one. Calls that arrive while that many
// run wait, and then run together as the next batch (up to Max). Batches
// run on goroutines that live only while there are calls; no caller runs
// others' work.
//
// How a batch fails decides what its callers hear:
//
//   - Run returns Faults: the calls it names fail with their own errors, and
//     the others run again as a batch.
//   - Run returns an error that Isolate accepts (the database refused a
//     statement, which may be one call's doing), or panics: the batch is
//     split in halves and each half run again, until the calls at fault are
//     alone. Only they fail.
//   - Any other error (a lost connection, a timeout: the database is not
//     answering) fails every call of the batch at once with that error.
//     Nothing is run again call by call.
//
// A batch, its retries and splits included, runs under one deadline of
// Timeout. So when the database stops answering, a call waits at most the
// rest of the batch in flight when it arrived, then its own: twice Timeout,
// when no more than Max calls wait ahead of it. Callers bound their wait
// with their context: when it ends, Do returns at once with the context's
// error. A call already taken into a batch may still be carried out by it;
// its caller only no longer hears how it went.
//
// A Combiner must not be copied after first use.
type Combiner[In, Out any] struct {
	// Max caps how many calls one batch carries. Zero means 64.
	Max int
	// Concurrency is how many batches may run at once. Zero means one. More
	// lets a batch execute while another waits for its commit to be flushed;
	// a call still runs at once whenever fewer batches than this run.
	Concurrency int
	// Timeout bounds each batch, its retries and splits included. Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// Run does one batch under ctx, which carries the batch's deadline and
	// none of the callers' cancellations. It returns one Out per In, in
	// order, or an error.
	Run func(ctx context.Context, ins []In) ([]Out, error)
	// Isolate reports whether an error of Run may be the doing of one call
	// rather than of the batch, so that splitting the batch finds it. Nil
	// means never: every error but Faults fails the whole batch.
	Isolate func(err error) bool
	// Observe, if set, is told the size of each batch taken from the queue.
	Observe func(n int)

	mu      sync.Mutex
	running int // batches running (drain goroutines)
	pending []*call[In, Out]
}

// Faults is an error Run returns when it knows which calls failed for
// reasons of their own, by their index in the batch: those calls fail with
// their errors, and the others run again as one batch.
type Faults map[int]error

func (f Faults) Error() string {
	for _, i := range slices.Sorted(maps.Keys(f)) {
		return fmt.Sprintf("%d calls of the batch failed; the first: %v", len(f), f[i])
	}
	return "no call of the batch failed"
}

// PanicError is the error of a call whose batch panicked (and, split down
// to that call alone, still did).
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("batch panicked: %v", e.Value) }

type call[In, Out any] struct {
	in   In
	done chan result[Out] // buffered: a batch never waits for a caller that left
}

type result[Out any] struct {
	out Out
	err error
}

// Do runs in, in a batch with whatever else is waiting, and returns its
// result. It returns ctx's error as soon as ctx ends.
func (c *Combiner[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	var zero Out
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	me := &call[In, Out]{in: in, done: make(chan result[Out], 1)}
	c.mu.Lock()
	c.pending = append(c.pending, me)
	if c.running < max(c.Concurrency, 1) {
		c.running++
		go c.drain()
	}
	c.mu.Unlock()

	select {
	case r := <-me.done:
		return r.out, r.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if i := slices.Index(c.pending, me); i >= 0 {
		c.pending = slices.Delete(c.pending, i, i+1)
	}
	c.mu.Unlock()
	select {
	case r := <-me.done: // the batch answered as ctx ended: the answer wins
		return r.out, r.err
	default:
		return zero, ctx.Err()
	}
}

// Waiting returns how many calls wait for a batch to take them.
func (c *Combiner[In, Out]) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// drain runs batches until no call waits.
func (c *Combiner[In, Out]) drain() {
	for {
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		n := min(len(c.pending), cmp.Or(c.Max, 64))
		calls := slices.Clone(c.pending[:n])
		c.pending = slices.Delete(c.pending, 0, n)
		c.mu.Unlock()

		if c.Observe != nil {
			c.Observe(len(calls))
		}
		ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(c.Timeout, DefaultTimeout))
		_ = c.settle(ctx, calls)
		cancel()
	}
}

// settle runs calls until each has its answer, splitting and retrying as
// the errors allow. It returns the error that failed them all when that
// error was not one call's doing.
func (c *Combiner[In, Out]) settle(ctx context.Context, calls []*call[In, Out]) error {
	for len(calls) > 0 {
		ins := make([]In, len(calls))
		for i, cl := range calls {
			ins[i] = cl.in
		}
		outs, err := c.safeRun(ctx, ins)
		if err == nil {
			for i, cl := range calls {
				cl.done <- result[Out]{out: outs[i]}
			}
			return nil
		}
		var faults Faults
		if errors.As(err, &faults) && len(faults) > 0 {
			rest := make([]*call[In, Out], 0, len(calls))
			for i, cl := range calls {
				if ferr, ok := faults[i]; ok {
					cl.done <- result[Out]{err: ferr}
				} else {
					rest = append(rest, cl)
				}
			}
			if len(rest) < len(calls) {
				calls = rest
				continue
			}
		}
		if !c.isolate(err) {
			fail(calls, err)
			return err
		}
		if len(calls) == 1 {
			fail(calls, err)
			return nil
		}
		half := len(calls) / 2
		if outage := c.settle(ctx, calls[:half]); outage != nil {
			fail(calls[half:], outage)
			return outage
		}
		calls = calls[half:]
	}
	return nil
}

func (c *Combiner[In, Out]) isolate(err error) bool {
	var p *PanicError
	if errors.As(err, &p) {
		return true
	}
	return c.Isolate != nil && c.Isolate(err)
}

// safeRun is Run with a panic turned into an error: the callers waiting on
// a batch, and every later call, must not hang on a batch that never
// reports back.
func (c *Combiner[In, Out]) safeRun(ctx context.Context, ins []In) (outs []Out, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p}
		}
	}()
	outs, err = c.Run(ctx, ins)
	if err == nil && len(outs) != len(ins) {
		err = fmt.Errorf("a batch of %d gave %d results", len(ins), len(outs))
	}
	return outs, err
}

func fail[In, Out any](calls []*call[In, Out], err error) {
	for _, cl := range calls {
		cl.done <- result[Out]{err: err}
	}
}
