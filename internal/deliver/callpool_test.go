package deliver

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goroutineID returns the running goroutine's number, from its stack's
// first line ("goroutine 12 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

// testPool returns a pool whose callers the test's end stops.
func testPool(t *testing.T, idle time.Duration) *callPool {
	p := newCallPool(idle)
	t.Cleanup(p.close)
	return p
}

func TestCallPoolRunsCallsOnCallersThatOutliveThem(t *testing.T) {
	p := testPool(t, time.Minute)
	job := goroutineID()
	seen := map[string]int{}
	for i := range 100 {
		var ran string
		got := p.run(func() callResult {
			ran = goroutineID()
			return callResult{status: 200 + i}
		})
		require.Equal(t, 200+i, got.status, "the call's own result comes back")
		require.NotEqual(t, job, ran, "the call runs on a caller, not on the job's goroutine")
		seen[ran]++
	}
	// One call at a time: an idle caller takes the next, so a handful of
	// goroutines ran all hundred (a new one each time was the old cost).
	assert.LessOrEqual(t, len(seen), 10, "calls ran on %d goroutines", len(seen))
}

func TestCallPoolRunsCallsAtOnce(t *testing.T) {
	// The pool bounds nothing (the route's tokens do): k calls handed over
	// together all run at once, each waiting here until all have started.
	const k = 50
	p := testPool(t, time.Minute)
	var started sync.WaitGroup
	started.Add(k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			got := p.run(func() callResult {
				started.Done()
				started.Wait()
				return callResult{status: i}
			})
			assert.Equal(t, i, got.status)
		})
	}
	wg.Wait()
}

func TestCallPoolPanicsOnTheJobsGoroutine(t *testing.T) {
	// River recovers a job's panic and fails the run; a call that panics on
	// a caller must do the same, not take the worker process down.
	p := testPool(t, time.Minute)
	assert.PanicsWithValue(t, "the request's program broke", func() {
		p.run(func() callResult { panic("the request's program broke") })
	})
	// The caller that recovered goes on serving.
	assert.Equal(t, 204, p.run(func() callResult { return callResult{status: 204} }).status)
}

func TestCallPoolCallersExitWhenIdle(t *testing.T) {
	before := runtime.NumGoroutine()
	p := testPool(t, 20*time.Millisecond)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			p.run(func() callResult { time.Sleep(5 * time.Millisecond); return callResult{} })
		})
	}
	wg.Wait()
	waitGoroutines(t, before, "idle callers did not exit")
}

func TestCallPoolCloseStopsItsCallers(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newCallPool(time.Hour)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			p.run(func() callResult { time.Sleep(5 * time.Millisecond); return callResult{} })
		})
	}
	wg.Wait()
	require.Greater(t, runtime.NumGoroutine(), before, "idle callers wait for more calls")
	p.close()
	waitGoroutines(t, before, "callers left after close")
	// A call after close runs on the job's own goroutine.
	job := goroutineID()
	var ran string
	p.run(func() callResult { ran = goroutineID(); return callResult{} })
	assert.Equal(t, job, ran)
	waitGoroutines(t, before, "a call after close started a caller")
}

// waitGoroutines polls until no more goroutines run than before (a
// goroutine that has returned leaves the count a moment later).
func waitGoroutines(t *testing.T, before int, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d goroutines, %d before the calls", msg, runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
