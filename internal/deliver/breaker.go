package deliver

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/batch"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/route"
)

// breakerRefresh is how old this worker's copy of the routes' breakers may
// grow before a job reads them again. Only a closed circuit is taken from
// the copy (an open one is read afresh for each job it holds back), so a
// circuit another replica opened costs this one at most the attempts it
// starts in that time, and each of those learns the state from its own
// failure's record.
const breakerRefresh = time.Second

// probeGrace is how long after a probe falls due a job on its last
// attempt waits before it takes the probe itself: a job with attempts left
// is preferred, so that a failed probe does not fail its delivery, but a
// circuit whose waiting jobs are all on their last attempt still probes.
const probeGrace = 2 * time.Second

// minSnooze is the shortest wait of a job the breaker holds back.
const minSnooze = 50 * time.Millisecond

// breakerStore is the part of the claim store the breakers use: the
// routes' breaker rows, read, probed, and moved on by answers.
type breakerStore interface {
	Breakers(ctx context.Context, routes []string) (map[string]claim.Breaker, error)
	BreakerProbe(ctx context.Context, route string, lease time.Duration) (granted bool, b claim.Breaker, err error)
	BreakerAnswer(ctx context.Context, route string, ev claim.BreakerEvent, answered time.Time, failure string, set claim.BreakerSettings) (claim.BreakerChange, error)
	BreakerDelivered(ctx context.Context, route string, answered time.Time, remember time.Duration) (bool, error)
	BreakerWake(ctx context.Context, route string) (int, error)
}

// wakeAfterClose are the delays, after this worker closed a circuit, at
// which it wakes the route's held jobs again: a job that read the circuit
// half-open just before the close commits its snooze (until the probe's
// lease ends) after the close's own wake-up, and would otherwise wait out
// the lease. The first catches the snoozes of that instant, the second
// those River's completer was slow to commit.
var wakeAfterClose = []time.Duration{time.Second, 5 * time.Second}

// breakers is the worker's side of the routes' circuit breakers, whose
// state is in Postgres (claim.Store.BreakerApply), shared by every replica.
// A job asks admit before its call and reports the call's verdict to
// record; a job held back is snoozed, which spends none of its attempts.
type breakers struct {
	store    breakerStore
	settings map[string]claim.BreakerSettings // routes whose breaker is on
	lease    map[string]time.Duration         // a probe's lease, per route
	logger   *slog.Logger
	timeout  time.Duration
	now      func() time.Time
	// answers carries, per route, the delivered answers that arrive while
	// one is being written as one write (see delivered).
	answers map[string]*batch.Combiner[time.Time, bool]

	mu         sync.Mutex
	known      map[string]claim.Breaker
	readAt     time.Time
	refreshing atomic.Bool
	// wakes are the pending wake-ups after a close (see wakeAfterClose);
	// stopped once the worker stops.
	wakes   map[string][]*time.Timer
	stopped bool
}

func newBreakers(db claim.DB, cfg *config.Config, routes *route.Table, logger *slog.Logger, timeout time.Duration) *breakers {
	b := &breakers{store: claim.NewStore(db, nil, nil), settings: map[string]claim.BreakerSettings{},
		lease: map[string]time.Duration{}, logger: logger, timeout: timeout, now: time.Now, known: map[string]claim.Breaker{},
		answers: map[string]*batch.Combiner[time.Time, bool]{}}
	for _, r := range routes.Routes() {
		if r.Breaker.On() {
			b.answers[r.Name] = &batch.Combiner[time.Time, bool]{Max: maxDeliveredAnswers, Timeout: timeout,
				Run: func(ctx context.Context, answered []time.Time) ([]bool, error) {
					return b.writeDelivered(ctx, r.Name, answered)
				}}
			// Config.Parse sets these defaults; a Config built in code may not.
			coolDown := cmp.Or(r.Breaker.CoolDown.D(), config.DefaultBreakerCoolDown)
			b.settings[r.Name] = claim.BreakerSettings{Failures: cmp.Or(r.Breaker.Failures, config.DefaultBreakerFailures),
				CoolDown: coolDown, MaxCoolDown: cmp.Or(r.Breaker.MaxCoolDown.D(), max(config.DefaultBreakerMaxCoolDown, coolDown))}
			// A run's longest: its timeout, the grace and its end.
			b.lease[r.Name] = jobTimeout(cfg, r.Timeout.D()) + 2*timeout
		}
	}
	return b
}

// gate is one job's passage through its route's breaker.
type gate struct {
	route string
	probe bool // this job is the half-open circuit's one probe
	done  bool
}

// admit lets job's call through its route's breaker, or returns the
// snooze that puts the job back until the circuit may let it through.
// A nil gate means the route has no breaker.
func (b *breakers) admit(ctx context.Context, job *river.Job[claim.DeliveryArgs]) (*gate, error) {
	route := job.Args.Route
	if _, on := b.settings[route]; !on {
		return nil, nil
	}
	if st := b.cached(ctx, route); st.State == claim.BreakerClosed {
		return &gate{route: route}, nil
	}
	st, err := b.read(ctx, route)
	if err != nil {
		return nil, river.JobSnooze(breakerRefresh)
	}
	now := b.now()
	due := func() (time.Time, bool) {
		at := st.NextProbeAt
		if st.State == claim.BreakerHalfOpen {
			at = st.ProbeUntil
		}
		if at == nil {
			return now, true
		}
		return *at, !now.Before(*at)
	}
	at, ok := due()
	switch {
	case st.State == claim.BreakerClosed:
		return &gate{route: route}, nil
	case !ok:
		return nil, snoozeUntil(at, now)
	case job.Attempt >= job.MaxAttempts && now.Before(at.Add(probeGrace)):
		return nil, snoozeUntil(at.Add(probeGrace), now)
	}
	granted, st, err := b.store.BreakerProbe(ctx, route, b.lease[route])
	if err != nil {
		b.logger.Warn("could not ask for the breaker's probe; the job waits", slog.String("route", route), slog.String("error", err.Error()))
		return nil, river.JobSnooze(breakerRefresh)
	}
	b.put(route, st)
	switch {
	case granted:
		b.logger.Info("circuit half-open: sending one delivery as its probe", slog.String("route", route), slog.Int64("job_id", job.ID))
		return &gate{route: route, probe: true}, nil
	case st.State == claim.BreakerClosed:
		return &gate{route: route}, nil
	}
	at, _ = due()
	return nil, snoozeUntil(at, now)
}

// snoozeUntil is the snooze of a job held back until at.
func snoozeUntil(at, now time.Time) error { return river.JobSnooze(max(at.Sub(now), minSnooze)) }

// record reports the verdict of g's call, whose answer came in at
// answered, to the route's breaker; sent says whether a request went out,
// and failure is the class of a call that did not deliver (failureClass).
// It is called once per gate (later calls do nothing); a probe whose job
// ends without a verdict is released by release, so that another job may
// probe at once.
func (b *breakers) record(ctx context.Context, g *gate, v verdict, sent bool, answered time.Time, failure string) {
	if g == nil || g.done {
		return
	}
	g.done = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	defer cancel()
	var ev claim.BreakerEvent
	switch {
	case g.probe && (!sent || v.permanent()):
		ev = claim.BreakerProbeReleased
	case g.probe && v.delivers():
		ev = claim.BreakerProbeDelivered
	case g.probe:
		ev = claim.BreakerProbeFailed
	case sent && v.breakerFailure():
		ev = claim.BreakerFailed
	case sent && v.delivers():
		b.delivered(ctx, g.route, answered)
		return
	default:
		return
	}
	ch, err := b.store.BreakerAnswer(ctx, g.route, ev, answered, failure, b.settings[g.route])
	if err != nil {
		b.logger.Warn("could not record an attempt with the route's breaker", slog.String("route", g.route), slog.String("error", err.Error()))
		return
	}
	b.put(g.route, ch.Breaker)
	switch ch.Action {
	case claim.ActionBreakerOpen:
		b.logger.Warn("circuit open: nothing is sent to the route until its probe", slog.String("route", g.route),
			slog.Int("failures", ch.Failures), slog.String("last_failure", failure), slog.Duration("cool_down", ch.CoolDown))
	case claim.ActionBreakerClose:
		b.logger.Info("circuit closed: the probe delivered; waiting deliveries flow", slog.String("route", g.route))
		b.wakeLater(g.route)
	}
}

// wakeLater wakes route's held jobs again after each of wakeAfterClose.
func (b *breakers) wakeLater(route string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	for _, t := range b.wakes[route] {
		t.Stop() // a close before them: these wake-ups cover it
	}
	if b.wakes == nil {
		b.wakes = map[string][]*time.Timer{}
	}
	b.wakes[route] = nil
	for _, d := range wakeAfterClose {
		b.wakes[route] = append(b.wakes[route], time.AfterFunc(d, func() {
			ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
			defer cancel()
			if _, err := b.store.BreakerWake(ctx, route); err != nil {
				b.logger.Warn("could not wake the jobs held back after the circuit closed", slog.String("route", route), slog.String("error", err.Error()))
			}
		}))
	}
}

// stop cancels the pending wake-ups.
func (b *breakers) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	for _, ts := range b.wakes {
		for _, t := range ts {
			t.Stop()
		}
	}
	b.wakes = nil
}

// release frees the probe of a job that ends without a call.
func (b *breakers) release(ctx context.Context, g *gate) { b.record(ctx, g, 0, false, b.now(), "") }

// maxDeliveredAnswers caps how many delivered answers one write carries.
const maxDeliveredAnswers = 1024

// delivered tells the route's breaker of a delivery answered at answered,
// whatever this worker's copy says: a failure another replica (or another
// call of this one) answered just before may not show in the copy yet,
// or not even be written. The store writes only when the row counts
// failures or heard of one within the time a failure's write may take
// (the record timeout, and the copy's age). The delivered answers of a
// route that arrive while one is being written share the next write
// (writeDelivered): at a full drain, a round trip per batch of deliveries
// rather than per delivery.
func (b *breakers) delivered(ctx context.Context, route string, answered time.Time) {
	if _, err := b.answers[route].Do(ctx, answered); err != nil {
		b.logger.Warn("could not record a delivery with the route's breaker", slog.String("route", route), slog.String("error", err.Error()))
	}
}

// writeDelivered writes delivered answers of route as one: the latest of
// them. Written one by one, in any order, they would leave the same row
// (claim.Breaker.Next): every failure answered before the latest dropped,
// every one answered after it kept, the latest as the last delivery.
func (b *breakers) writeDelivered(ctx context.Context, route string, answered []time.Time) ([]bool, error) {
	changed, err := b.store.BreakerDelivered(ctx, route, slices.MaxFunc(answered, time.Time.Compare), b.timeout+breakerRefresh)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(answered))
	for i := range out {
		out[i] = changed
	}
	return out, nil
}

// cached returns this worker's copy of route's breaker, read again first
// when it is older than breakerRefresh (by one job; the others use the
// copy meanwhile).
func (b *breakers) cached(ctx context.Context, route string) claim.Breaker {
	b.mu.Lock()
	stale := b.now().Sub(b.readAt) > breakerRefresh
	st, ok := b.known[route]
	b.mu.Unlock()
	if (stale || !ok) && b.refreshing.CompareAndSwap(false, true) {
		defer b.refreshing.Store(false)
		routes := make([]string, 0, len(b.settings))
		for r := range b.settings {
			routes = append(routes, r)
		}
		all, err := b.store.Breakers(ctx, routes)
		if err == nil {
			b.mu.Lock()
			b.known, b.readAt = all, b.now()
			st = all[route]
			b.mu.Unlock()
		}
	}
	if st.State == "" {
		st.State = claim.BreakerClosed
	}
	return st
}

// read returns route's breaker as stored now.
func (b *breakers) read(ctx context.Context, route string) (claim.Breaker, error) {
	all, err := b.store.Breakers(ctx, []string{route})
	if err != nil {
		return claim.Breaker{}, err
	}
	b.put(route, all[route])
	return all[route], nil
}

func (b *breakers) put(route string, st claim.Breaker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.known[route] = st
}
