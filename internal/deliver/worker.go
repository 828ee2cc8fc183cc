// Package deliver performs the side effects: a River worker that sends one
// delivery to its route with a stable Idempotency-Key, classifies the answer,
// and records the outcome in the same transaction that ends the job.
package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/logbudget"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/sanitize"
	"github.com/hookgate/hookgate/internal/telemetry"
)

// attemptGrace is how much longer than a route's timeout River gives one job
// run: time to load the delivery before the call. A fifth of the config's
// end bound (config.Worker.EndBound): 5s by default.
func attemptGrace(cfg *config.Config) time.Duration { return cfg.Worker.EndBound() / 5 }

// recordTimeout bounds the transaction that records an attempt. It runs on a
// context detached from the job's, so that an answer that arrived just as
// the worker began to stop is still written down. An end may wait for two
// (see newCompleter): with the grace, the end bound. 10s by default.
func recordTimeout(cfg *config.Config) time.Duration { return cfg.Worker.EndBound() * 2 / 5 }

// Options configure a Worker.
type Options struct {
	// Config gives each delivery's route: URL, timeout, backoff.
	Config *config.Config
	// SigningSecrets maps a route name to its Standard Webhooks secret
	// (config.Secrets.Route). Routes without one are sent unsigned.
	SigningSecrets map[string][]byte
	// SecretHeaders holds the values of each route's secret_headers
	// (config.Secrets.Headers).
	SecretHeaders map[string]map[string]string
	// Redactor removes secrets from what downstreams answer before it is
	// stored or logged. Default: one of SigningSecrets and SecretHeaders.
	Redactor *sanitize.Redactor
	// Routes is Config's route table, compiled with SecretHeaders.
	// Default: compiled here (route.New).
	Routes *route.Table
	// DB is where the worker reads deliveries and records attempts: the
	// pool in production, a test's transaction under rivertest.
	DB claim.DB
	// HTTPClient makes every route's downstream calls. It must not follow
	// redirects. Default: one client per route (see routeClient), so that
	// each route keeps its own connections and TLS settings.
	HTTPClient *http.Client
	// Logger receives one line per attempt outcome.
	Logger *slog.Logger
	// Metrics records outcomes and durations; nil records none.
	Metrics *Metrics
	// Tracing traces each attempt and its downstream request; nil or off
	// traces nothing.
	Tracing *telemetry.Tracing
}

// Worker is the River worker of claim.DeliveryArgs jobs. One job run is at
// most one downstream call. Its outcome is recorded like this:
//
//   - 2xx (that the route's success program, if any, accepts; see
//     judge): the delivery is completed and the job's row deleted in one
//     transaction (see completer), so a crash can never leave one
//     without the other.
//   - a rejection (4xx other than 408, 409, 425, 429; a redirect), or a
//     retryable failure on the job's last attempt: the delivery is failed
//     and the job's row deleted, again in one transaction. River has no
//     transactional "fail job"; the delivery table and its history are
//     the authority on what happened (River's job rows are internal), and
//     its last_error says why.
//   - a retryable failure with attempts left: the attempt is recorded and
//     Work returns an error, so River schedules the next run at NextRetry.
//   - a call cut short because the worker is stopping: the attempt is
//     recorded as interrupted and the job goes back to the queue without
//     using one of its attempts.
//
// A job of a route whose circuit breaker is open is snoozed before its
// call (see breakers): nothing is sent and River gives its attempt back.
//
// A job whose delivery is no longer processing (completed by a run whose job
// was then rescued, or settled by an operator) ends without a call.
//
// A worker that dies mid-call leaves its job running until River's rescuer
// makes it retryable after worker.rescue_after; the next run sends the same
// Idempotency-Key, and the downstream's dedupe absorbs the repeat. Likewise,
// when an outcome cannot be recorded (the database is unreachable), Work
// returns an error and River runs the job again, under the same key; if that
// was the job's last attempt, River discards the job and the reconciler
// fails the delivery.
//
// Hookgate-Attempt is the delivery's attempt_base plus River's attempt
// number for the job. River makes that number durable when it fetches the
// job, so a crashed or unrecorded attempt still moves it on, and it costs no
// commit of ours; attempt_base carries the numbers of the delivery's earlier
// jobs (see claim.AttemptResult.Spent), so a reopen continues after them.
// No number is sent twice for one delivery.
type Worker struct {
	river.WorkerDefaults[claim.DeliveryArgs]

	cfg    *config.Config
	routes *route.Table
	// runtimes holds each configured route's runtime, by name.
	runtimes map[string]*routeRuntime
	loads    *loader
	ends     *completer
	logger   *slog.Logger
	metrics  *Metrics
	tracer   tracer
	redact   *sanitize.Redactor
	now      func() time.Time

	// hints carries a Retry-After from Work to NextRetry, by job ID. River
	// calls NextRetry with the job row as it was before the failed run, so
	// the run's own error is not in job.Errors yet; both calls happen in this
	// process, one right after the other.
	mu    sync.Mutex
	hints map[int64]time.Duration

	// callers runs the calls themselves, on goroutines that outlive a job
	// (see callPool).
	callers *callPool

	// lines samples the "delivered" lines (see deliveredLinesPerSecond).
	lines *logbudget.Budget

	// breakers holds jobs back from routes whose circuit is open.
	breakers *breakers
}

// callWait bounds how long a job waits for one of its route's call tokens
// before it is snoozed back to the queue (no attempt used, nothing sent): a
// tenth of the config's end bound, 2.5s by default, well inside the grace
// River's timeout gives a run beyond the route's timeout, so that a call
// that got its token still has its whole timeout.
func callWait(cfg *config.Config) time.Duration { return cfg.Worker.EndBound() / 10 }

// NewWorker returns a delivery worker. It fails, naming the key, when a
// route cannot be compiled, its TLS files cannot be read, or its signing
// secret is not a Standard Webhooks secret (never quoting the value).
func NewWorker(o Options) (*Worker, error) {
	routes := o.Routes
	var err error
	if routes == nil {
		if routes, err = route.New(o.Config, o.SecretHeaders); err != nil {
			return nil, err
		}
	}
	w := &Worker{
		cfg:     o.Config,
		routes:  routes,
		loads:   newLoader(o.DB),
		ends:    newCompleter(o.DB, o.Metrics, recordTimeout(o.Config), routes.HasDependents, routes.MaxAttempts),
		logger:  cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
		metrics: o.Metrics,
		tracer:  newTracer(o.Tracing),
		redact:  redactorOf(o),
		now:     time.Now,
		hints:   map[int64]time.Duration{},
		callers: newCallPool(callerIdle),
		lines:   logbudget.New(deliveredLinesPerSecond, deliveredLinesSummary),
	}
	if w.runtimes, err = w.newRuntimes(o); err != nil {
		return nil, err
	}
	w.breakers = newBreakers(o.DB, o.Config, routes, w.logger, recordTimeout(o.Config))
	return w, nil
}

// Close stops the goroutines the worker's calls ran on (see callPool), and
// the wake-ups of held jobs a closed circuit has pending (see breakers).
// Call it once River has stopped working jobs; a call after it runs on
// its job's goroutine.
func (w *Worker) Close() {
	w.callers.close()
	w.breakers.stop()
}

// JobTimeout is the River client's JobTimeout for cfg: the longest route
// timeout plus a grace for the database work before the call, but never more
// than worker.rescue_after, which River requires.
func JobTimeout(cfg *config.Config) time.Duration {
	var longest time.Duration
	for _, r := range cfg.Routes {
		longest = max(longest, r.Timeout.D())
	}
	return jobTimeout(cfg, longest)
}

func jobTimeout(cfg *config.Config, routeTimeout time.Duration) time.Duration {
	return min(routeTimeout+attemptGrace(cfg), cfg.Worker.RescueAfter.D())
}

// Timeout implements river.Worker: the route's timeout plus a grace, capped
// by worker.rescue_after. After it the run only records its outcome, for at
// most two record transactions: config validation keeps the route's timeout
// plus that end bound under rescue_after, so a live run is never rescued
// (River's completion does not tell a run's attempt from a newer one's; see
// config.Worker.EndBound). A job of a
// route that is gone gets River's default; it makes no call.
func (w *Worker) Timeout(job *river.Job[claim.DeliveryArgs]) time.Duration {
	r, ok := w.runtimes[job.Args.Route]
	if !ok {
		return 0
	}
	return jobTimeout(w.cfg, r.Timeout.D())
}

// NextRetry implements river.Worker: the route's backoff after the job's
// n-th failed run (n = len(job.Errors)+1, since River passes the row as it
// was before this run), lengthened to a Retry-After the downstream sent, and
// capped by backoff.max either way.
func (w *Worker) NextRetry(job *river.Job[claim.DeliveryArgs]) time.Time {
	hint := w.takeHint(job.ID)
	r, ok := w.runtimes[job.Args.Route]
	if !ok {
		return time.Time{} // River's default; the next run fails the delivery
	}
	return w.now().Add(retryDelay(r.Backoff, len(job.Errors)+1, hint))
}

func (w *Worker) putHint(jobID int64, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hints[jobID] = d
}

func (w *Worker) takeHint(jobID int64) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.hints[jobID]
	delete(w.hints, jobID)
	return d
}

// Work implements river.Worker: at most one downstream call for the
// delivery, then its outcome recorded (see Worker).
func (w *Worker) Work(ctx context.Context, job *river.Job[claim.DeliveryArgs]) error {
	ctx, span := w.tracer.startAttempt(ctx, job)
	err := w.work(ctx, job)
	endAttempt(span, err)
	return err
}

func (w *Worker) work(ctx context.Context, job *river.Job[claim.DeliveryArgs]) error {
	k := claim.Key{Provider: job.Args.Provider, EventID: job.Args.EventID, Route: job.Args.Route}
	log := &jobLog{base: w.logger, lines: w.lines, now: w.now, attrs: []slog.Attr{slog.String("provider", k.Provider),
		slog.String("event_id", k.EventID), slog.String("route", k.Route), slog.Int64("job_id", job.ID)}}

	// The call token is taken before the load, so that at most the route's
	// concurrency of payloads are held waiting for their call, and given
	// back as soon as the call returns, before the end is recorded.
	rt, configured := w.runtimes[k.Route]
	release := func() {}
	if configured {
		var err error
		if release, err = w.awaitCall(ctx, log, rt.calls); err != nil {
			return err
		}
		defer release()
	}

	// Then the route's breaker, asked with the token held so that no call
	// of this process starts on a circuit seen closed before it opened: a
	// job it holds back is snoozed, which spends none of its attempts.
	gate, err := w.breakers.admit(ctx, job)
	if err != nil {
		w.metrics.countRun(k.Route, runHeld)
		return err
	}
	defer w.breakers.release(ctx, gate)

	d, err := w.loads.load(ctx, k)
	if errors.Is(err, claim.ErrNotFound) {
		w.metrics.countRun(k.Route, runSkipped)
		log.Warn("delivery no longer exists; job ends without a call")
		return nil
	}
	if err != nil {
		return err
	}
	if d.Status != claim.DeliveryProcessing {
		// Completed by an earlier run whose job was rescued, or settled by an
		// operator: the downstream already had its chance.
		w.metrics.countRun(k.Route, runSkipped)
		log.Info("delivery is already " + string(d.Status) + "; job ends without a call")
		return nil
	}
	if !configured {
		return w.ends.finish(ctx, job, log, d, callResult{verdict: rejected,
			reason: fmt.Sprintf("route %q is no longer configured", k.Route)}, false)
	}
	if d.Payload == nil {
		return w.ends.finish(ctx, job, log, d, callResult{verdict: rejected,
			reason: "the event's payload was cleared by retention before it was delivered"}, false)
	}

	attempt := d.AttemptBase + job.Attempt
	start := time.Now()
	o := w.callers.run(func() callResult { return w.call(ctx, rt, d, attempt) })
	// The breaker hears of the call before the token goes back, so that the
	// next call of this process sees the circuit a failure opened. A
	// delivery on a route with no failure counted writes nothing here.
	interrupted := o.verdict.retries() && errors.Is(ctx.Err(), context.Canceled) // says nothing of the route
	w.breakers.record(ctx, gate, o.verdict, !o.unsent && !interrupted, cmp.Or(o.answered, time.Now()))
	release()
	d.Payload = nil // not needed to record the outcome
	w.metrics.attempt(k.Route, time.Since(start))
	if !o.unsent {
		o.call = &claim.Call{Attempt: attempt, StartedAt: start, Duration: time.Since(start), Status: o.status, Response: o.response,
			Request: o.request, ResponseHeaders: o.responseHeaders, RunAttempt: job.Attempt, RunMax: job.MaxAttempts}
	}
	log.with(slog.Int("attempt", attempt), slog.Duration("duration", time.Since(start)))
	if o.status != 0 {
		log.with(slog.Int("status", o.status))
	}
	if o.successErr != nil {
		log.with(slog.String("success_error", bound(o.successErr.Error())))
	}

	switch {
	case o.verdict.delivers(), o.verdict.permanent():
		return w.ends.finish(ctx, job, log, d, o, !o.unsent)
	case errors.Is(ctx.Err(), context.Canceled):
		return w.ends.interrupted(ctx, log, d, o)
	case job.Attempt >= job.MaxAttempts:
		o.reason = bound(exhausted(attempt, job.Attempt, job.MaxAttempts) + o.reason)
		return w.ends.finish(ctx, job, log, d, o, true)
	default:
		err := w.ends.retry(ctx, job, log, d, o)
		if o.retryAfter > 0 && err != nil {
			w.putHint(job.ID, o.retryAfter)
		}
		return err
	}
}

// awaitCall takes one of a route's call tokens and returns the function
// that gives it back (once, however often called). A job that waits longer
// than callWait, or whose worker stops meanwhile, is snoozed: River puts it
// back in the queue at once without using an attempt, and nothing was sent.
func (w *Worker) awaitCall(ctx context.Context, log *jobLog, tokens chan struct{}) (func(), error) {
	select {
	case tokens <- struct{}{}:
	default:
		t := time.NewTimer(callWait(w.cfg))
		defer t.Stop()
		select {
		case tokens <- struct{}{}:
		case <-t.C:
			log.Debug("every call slot of the route stayed busy; the job returns to the queue")
			return nil, river.JobSnooze(0)
		case <-ctx.Done():
			return nil, river.JobSnooze(0)
		}
	}
	held := true
	return func() {
		if held {
			held = false
			<-tokens
		}
	}, nil
}
