package deliver

import (
	"sync"
	"time"
)

// callerIdle is how long a caller waits for its next call before it exits.
const callerIdle = 10 * time.Second

// callPool runs downstream calls on goroutines that outlive a job.
//
// River runs each job on a goroutine of its own, started fresh, and a call
// descends deep into net/http (the request's program and signature, the
// client, the transport's round trip): on a fresh goroutine the runtime
// grows its stack, copying it each time, on every call. A drain's CPU
// profile of the worker put a tenth of its time there. A caller keeps the
// stack it grew from one call to the next, so the job's own goroutine
// stays shallow: it loads, hands its call over, waits, and records.
//
// The pool bounds nothing. A route's call tokens do (routeRuntime.calls): a job
// takes one before it hands its call over and gives it back once the call
// has returned, so no more calls of a route run at once than before. A
// call is handed to an idle caller when one waits, and otherwise to a new
// one; a caller with no call for callerIdle exits, and all exit on close.
type callPool struct {
	tasks chan *callTask // unbuffered: a send succeeds only to an idle caller
	idle  time.Duration

	mu      sync.Mutex
	closed  bool
	quit    chan struct{}
	callers sync.WaitGroup
}

type callTask struct {
	call func() callResult
	done chan callDone // buffered: a caller never waits for the job
}

// callDone is a call's result, or the value it panicked with.
type callDone struct {
	result   callResult
	panicked any
}

func newCallPool(idle time.Duration) *callPool {
	return &callPool{tasks: make(chan *callTask), idle: idle, quit: make(chan struct{})}
}

// close makes the idle callers exit and waits for every caller to; a call
// in flight finishes first. A call run after close runs on the job's own
// goroutine.
func (p *callPool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
	p.callers.Wait()
}

// start starts a caller for t, unless the pool is closed.
func (p *callPool) start(t *callTask) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.callers.Go(func() { p.serve(t) })
	return true
}

// run runs call on a caller and returns its result. A call that panics
// panics again here, on the job's goroutine, so that River recovers it
// and fails the run as it would have had the call run there.
func (p *callPool) run(call func() callResult) callResult {
	t := &callTask{call: call, done: make(chan callDone, 1)}
	select {
	case p.tasks <- t:
	default:
		if !p.start(t) {
			t.do()
		}
	}
	d := <-t.done
	if d.panicked != nil {
		panic(d.panicked)
	}
	return d.result
}

// serve runs t, then every call handed to it, until it has waited idle
// for none or the pool closes.
func (p *callPool) serve(t *callTask) {
	timer := time.NewTimer(p.idle)
	defer timer.Stop()
	for {
		t.do()
		timer.Reset(p.idle)
		select {
		case t = <-p.tasks:
		case <-timer.C:
			return
		case <-p.quit:
			return
		}
	}
}

// do runs the task's call and hands back its result or its panic.
func (t *callTask) do() {
	var d callDone
	defer func() {
		if v := recover(); v != nil {
			d.panicked = v
		}
		t.done <- d
	}()
	d.result = t.call()
}
