package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookgate/hookgate/internal/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errRefused = errors.New("the database refused a statement")
	errLost    = errors.New("connection lost")
)

// recorder is a Run that holds its first batch until released, so that the
// calls made meanwhile queue up, and records every batch it is given.
type recorder struct {
	gate chan struct{}
	// fail, if set, decides each batch's error.
	fail func(ctx context.Context, ins []int) error

	mu      sync.Mutex
	batches [][]int
}

func newRecorder() *recorder { return &recorder{gate: make(chan struct{})} }

func (r *recorder) run(ctx context.Context, ins []int) ([]int, error) {
	r.mu.Lock()
	first := len(r.batches) == 0
	r.batches = append(r.batches, slices.Clone(ins))
	r.mu.Unlock()
	if first {
		<-r.gate
	}
	if r.fail != nil {
		if err := r.fail(ctx, ins); err != nil {
			return nil, err
		}
	}
	out := make([]int, len(ins))
	for i, v := range ins {
		out[i] = v * 10
	}
	return out, nil
}

func (r *recorder) seen() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// outcome collects the results of the calls queue makes; wg ends when all
// have returned.
type outcome struct {
	out []int
	err []error
	wg  sync.WaitGroup
}

// queue makes a first call (input 0), held in r's first batch, then n more
// calls (1..n), and waits until all n wait behind it.
func queue(t *testing.T, r *recorder, c *batch.Combiner[int, int], n int) *outcome {
	t.Helper()
	o := &outcome{out: make([]int, n+1), err: make([]error, n+1)}
	o.wg.Go(func() { o.out[0], o.err[0] = c.Do(context.Background(), 0) })
	require.Eventually(t, func() bool { return len(r.seen()) == 1 }, 10*time.Second, time.Millisecond, "the first call runs at once")
	for i := 1; i <= n; i++ {
		o.wg.Go(func() { o.out[i], o.err[i] = c.Do(context.Background(), i) })
	}
	require.Eventually(t, func() bool { return c.Waiting() == n }, 10*time.Second, time.Millisecond)
	return o
}

func TestQueuedCallsShareOneBatch(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	var sizes []int
	c := &batch.Combiner[int, int]{Max: 3, Run: r.run, Observe: func(n int) { sizes = append(sizes, n) }}
	o := queue(t, r, c, 5)
	close(r.gate)
	o.wg.Wait()
	for i := range 6 {
		require.NoError(t, o.err[i])
		require.Equal(t, i*10, o.out[i])
	}
	seen := r.seen()
	require.Equal(t, [][]int{{0}}, seen[:1], "a lone call runs alone, at once")
	require.ElementsMatch(t, []int{1, 2, 3, 4, 5}, slices.Concat(seen[1:]...), "the queued calls ran once each")
	require.Equal(t, []int{1, 3, 2}, sizes, "the queue runs in batches of at most Max")
}

// TestOutageFailsEveryCallAtOnce: an error that is not one call's doing
// fails the whole batch at once, without running any call again.
func TestOutageFailsEveryCallAtOnce(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.fail = func(context.Context, []int) error { return fmt.Errorf("committing: %w", errLost) }
	c := &batch.Combiner[int, int]{Max: 2, Run: r.run, Isolate: func(err error) bool { return errors.Is(err, errRefused) }}
	o := queue(t, r, c, 5)
	close(r.gate)
	o.wg.Wait()
	for i := range 6 {
		require.ErrorIs(t, o.err[i], errLost, i)
	}
	seen := r.seen()
	require.Len(t, seen, 1+3, "each batch ran once: the lone first, then the five queued, two at a time")
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5}, slices.Concat(seen...), "no call ran twice")

	// The next call runs: the failure is not remembered.
	r.fail = nil
	out, err := c.Do(context.Background(), 7)
	require.NoError(t, err)
	require.Equal(t, 70, out)
}

// TestOneCallsFaultFailsOnlyThatCall: an error Isolate accepts splits the
// batch until the bad call is alone; the others succeed.
func TestOneCallsFaultFailsOnlyThatCall(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.fail = func(_ context.Context, ins []int) error {
		if slices.Contains(ins, 3) {
			return errRefused
		}
		return nil
	}
	c := &batch.Combiner[int, int]{Max: 10, Run: r.run, Isolate: func(err error) bool { return errors.Is(err, errRefused) }}
	o := queue(t, r, c, 6)
	close(r.gate)
	o.wg.Wait()
	for i := range 7 {
		if i == 3 {
			require.ErrorIs(t, o.err[i], errRefused)
			continue
		}
		require.NoError(t, o.err[i], i)
		require.Equal(t, i*10, o.out[i])
	}
	seen := r.seen()
	require.ElementsMatch(t, []int{1, 2, 3, 4, 5, 6}, seen[1], "the queued calls ran as one batch first")
	require.LessOrEqual(t, len(seen), 1+2*6-1, "splitting in halves runs at most 2n-1 batches")
}

// TestOutageWhileSplitting: when the database stops answering while a batch
// is being split, the calls not yet settled fail at once.
func TestOutageWhileSplitting(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.fail = func(_ context.Context, ins []int) error {
		switch len(ins) {
		case 1:
			return nil
		case 4:
			return errRefused // split...
		}
		return errLost // ...and the first half finds the database gone
	}
	c := &batch.Combiner[int, int]{Max: 10, Run: r.run, Isolate: func(err error) bool { return errors.Is(err, errRefused) }}
	o := queue(t, r, c, 4)
	close(r.gate)
	o.wg.Wait()
	require.NoError(t, o.err[0])
	for i := 1; i <= 4; i++ {
		require.ErrorIs(t, o.err[i], errLost, i)
	}
	seen := r.seen()
	require.Len(t, seen, 3, "the lone batch, the queued batch, its first half; the second half never ran")
	require.Len(t, seen[2], 2)
}

// TestFaultsRetryTheRest: calls Run names in Faults fail with their own
// errors, and the rest run again as one batch.
func TestFaultsRetryTheRest(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.fail = func(_ context.Context, ins []int) error {
		f := batch.Faults{}
		for i, v := range ins {
			if v%2 == 1 {
				f[i] = fmt.Errorf("odd %d", v)
			}
		}
		if len(f) > 0 {
			return f
		}
		return nil
	}
	c := &batch.Combiner[int, int]{Max: 10, Run: r.run}
	o := queue(t, r, c, 5)
	close(r.gate)
	o.wg.Wait()
	for i := range 6 {
		if i%2 == 1 {
			require.EqualError(t, o.err[i], fmt.Sprintf("odd %d", i))
			continue
		}
		require.NoError(t, o.err[i])
		require.Equal(t, i*10, o.out[i])
	}
	seen := r.seen()
	require.Len(t, seen, 3)
	require.ElementsMatch(t, []int{1, 2, 3, 4, 5}, seen[1])
	require.ElementsMatch(t, []int{2, 4}, seen[2], "the rest ran again, together")
}

// TestTimeoutFailsTheBatchOnce: a batch that hangs fails after Timeout, all
// its calls at once, and is not run again call by call.
func TestTimeoutFailsTheBatchOnce(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.fail = func(ctx context.Context, ins []int) error {
		if len(ins) > 1 || ins[0] != 0 {
			<-ctx.Done() // hangs until the batch's deadline
			return fmt.Errorf("waiting for the database: %w", ctx.Err())
		}
		return nil
	}
	c := &batch.Combiner[int, int]{Max: 10, Timeout: 50 * time.Millisecond, Run: r.run,
		Isolate: func(err error) bool { return errors.Is(err, errRefused) }}
	o := queue(t, r, c, 8)
	close(r.gate)
	o.wg.Wait()
	require.NoError(t, o.err[0])
	for i := 1; i <= 8; i++ {
		require.ErrorIs(t, o.err[i], context.DeadlineExceeded)
	}
	require.Len(t, r.seen(), 2, "the hung batch ran once")
}

// TestWaitingCallerHonoursItsContext: a caller whose context ends returns at
// once, while the batch ahead of it still runs, and its call is not run.
func TestWaitingCallerHonoursItsContext(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := &batch.Combiner[int, int]{Run: r.run}
	o := queue(t, r, c, 1)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, 99)
		errc <- err
	}()
	require.Eventually(t, func() bool { return c.Waiting() == 2 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled, "returned while the batch ahead is still held")
	require.Equal(t, 1, c.Waiting())

	close(r.gate)
	o.wg.Wait()
	require.NoError(t, o.err[1])
	for _, b := range r.seen() {
		require.NotContains(t, b, 99, "a call whose caller left before it was taken is not run")
	}

	_, err := c.Do(ctx, 5)
	require.ErrorIs(t, err, context.Canceled, "an ended context runs nothing")
}

// TestPanicFailsOnlyItsCall: a panic is split down like a refused
// statement; the calls that did not panic succeed, and later calls run.
func TestPanicFailsOnlyItsCall(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.fail = func(_ context.Context, ins []int) error {
		if slices.Contains(ins, 2) {
			panic("boom")
		}
		return nil
	}
	c := &batch.Combiner[int, int]{Run: r.run}
	o := queue(t, r, c, 3)
	close(r.gate)
	o.wg.Wait()
	var p *batch.PanicError
	require.ErrorAs(t, o.err[2], &p)
	require.Equal(t, "boom", p.Value)
	for _, i := range []int{0, 1, 3} {
		require.NoError(t, o.err[i])
	}
	out, err := c.Do(context.Background(), 4)
	require.NoError(t, err)
	require.Equal(t, 40, out)
}

// TestConcurrentBatches: with Concurrency 2, a call runs at once while one
// batch is held; only with both busy do calls queue.
func TestConcurrentBatches(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := &batch.Combiner[int, int]{Concurrency: 2, Run: r.run}
	o := queue(t, r, c, 0)
	out, err := c.Do(context.Background(), 1)
	require.NoError(t, err, "ran beside the held batch")
	require.Equal(t, 10, out)
	require.Zero(t, c.Waiting())
	close(r.gate)
	o.wg.Wait()
	require.NoError(t, o.err[0])
}

// TestRefused tells the database refusing a statement from not answering.
func TestRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code string
		want bool
	}{
		{"22021", true},  // invalid byte sequence: a malformed value
		{"23505", true},  // unique violation
		{"40P01", true},  // deadlock detected
		{"08006", false}, // connection failure
		{"53300", false}, // too many connections
		{"57014", false}, // query canceled (a statement timeout)
		{"57P01", false}, // admin shutdown
		{"58030", false}, // I/O error
		{"XX000", false}, // internal error
	} {
		require.Equal(t, tt.want, batch.Refused(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: tt.code})), tt.code)
	}
	require.False(t, batch.Refused(errors.New("no answer")), "an error that is not the database's")
	require.False(t, batch.Refused(context.DeadlineExceeded))
}
