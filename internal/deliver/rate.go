package deliver

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/route"
)

// maxRouteHold bounds how long a downstream's Retry-After holds its whole
// route: an hour, and never longer than the route's backoff.max, which
// bounds the 429'd delivery's own retry too (see retryDelay): the route
// is held as long as that delivery waits, so a Retry-After is honoured
// "capped by backoff.max" for the route as for the delivery.
const maxRouteHold = time.Hour

// rateStore is the part of the claim store the rates use: the routes'
// token buckets and Retry-After holds (route_rates).
type rateStore interface {
	RateTake(ctx context.Context, route string, set claim.RateSettings, want int) (claim.RateGrant, error)
	RateHold(ctx context.Context, route string, d time.Duration) (time.Time, error)
	Rates(ctx context.Context, routes []string) (map[string]claim.RateState, error)
}

// rates is the worker's side of the routes' rates and Retry-After holds,
// whose state is in Postgres (route_rates), shared by every replica. A job
// asks admit before its call, after the breaker and with its call token
// held; a job held back is snoozed, which spends none of its attempts.
//
// A worker's jobs of one paced route queue for tokens in line (pace.turn,
// first come first served), and the head of the line takes, in one
// statement (claim.Store.RateTake), as many tokens as there are jobs in
// line, up to the route's lease: so a busy route writes its row once per
// lease, not once per request, and tokens are spent as soon as they are
// taken. A worker that dies holding tokens loses at most one lease. A
// token not spent within tokenLife lapses, so that a request leaves within
// that of the take that counted it: the bound the bucket keeps over any
// window of per (limit + burst) is the workers' sending, up to that and
// the variation of the network's latency.
type rates struct {
	store   rateStore
	paced   map[string]*pace         // routes with a rate
	routes  []string                 // every configured route, for the holds
	holdMax map[string]time.Duration // longest Retry-After hold, by route
	wait    time.Duration            // longest wait in line before a snooze
	timeout time.Duration
	logger  *slog.Logger
	metrics *Metrics
	now     func() time.Time

	mu         sync.Mutex
	holds      map[string]time.Time // Retry-After holds known, by route
	readAt     time.Time
	refreshing atomic.Bool
}

// pace is one paced route's line of jobs in this worker.
type pace struct {
	set   claim.RateSettings
	lease int // most tokens one take asks for

	turn    chan struct{} // the head of the line holds it
	waiting atomic.Int64  // jobs in line, the head included
	served  atomic.Int64  // jobs the line has let through

	// Guarded by turn.
	tokens   int       // taken and not yet spent
	tokensAt time.Time // when they were taken: they lapse after tokenLife

	// nextAt is when the route's next token is free, as last heard (Unix
	// nanoseconds of this worker's clock); written by the head of the line,
	// read by the jobs behind it to size their snooze.
	nextAt atomic.Int64
}

// rateLease is how many tokens a worker takes at most in one statement: a
// tenth of the route's limit (at least 1), and never more than its burst
// + 1, the bucket. A worker killed holding a lease loses at most that many
// of the route's requests.
func rateLease(r config.Rate) int { return max(1, min(r.Limit/10, r.Burst+1)) }

// tokenLife is how long a token taken and not yet spent stays good: half
// an interval (per/limit), but at least 5ms, the time the jobs in line it
// was taken for need to pass the head of the line on a busy machine. A
// token older than that lapses, so that a request leaves within that of
// the take that counted it.
func tokenLife(set claim.RateSettings) time.Duration {
	return max(set.Interval()/2, 5*time.Millisecond)
}

// rateWait is the longest a job waits in line for its route's rate before
// it is snoozed: half of callWait (1.25s by default), so that the call
// token's wait, the rate's and the load stay inside the grace River's
// timeout gives a run beyond the route's timeout.
func rateWait(cfg *config.Config) time.Duration { return callWait(cfg) / 2 }

func newRates(db claim.DB, cfg *config.Config, routes *route.Table, logger *slog.Logger, metrics *Metrics, timeout time.Duration) *rates {
	r := &rates{store: claim.NewStore(db, nil, nil), paced: map[string]*pace{}, wait: rateWait(cfg), timeout: timeout,
		logger: logger, metrics: metrics, now: time.Now, holds: map[string]time.Time{}, holdMax: map[string]time.Duration{}}
	for _, rt := range routes.Routes() {
		r.routes = append(r.routes, rt.Name)
		r.holdMax[rt.Name] = min(rt.Backoff.Max.D(), maxRouteHold)
		if rt.Rate != nil {
			r.paced[rt.Name] = &pace{set: rateSettings(*rt.Rate), lease: rateLease(*rt.Rate), turn: make(chan struct{}, 1)}
		}
	}
	return r
}

func rateSettings(r config.Rate) claim.RateSettings {
	return claim.RateSettings{Limit: r.Limit, Per: r.Per.D(), Burst: r.Burst}
}

// admit lets job's call through its route's hold and rate, or returns the
// snooze that puts the job back until its route may be sent to again.
func (r *rates) admit(ctx context.Context, job *river.Job[claim.DeliveryArgs]) error {
	route := job.Args.Route
	start := r.now()
	if until, held := r.held(ctx, route); held {
		return r.snooze(route, until.Sub(start), 0)
	}
	p := r.paced[route]
	if p == nil {
		return nil
	}
	ahead := p.waiting.Add(1) - 1
	defer p.waiting.Add(-1)
	served := p.served.Load()
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case p.turn <- struct{}{}:
	case <-t.C:
		// Its turn is not near: back to the queue until about when it is,
		// but no later than a few waits from now, so that a line that
		// empties faster than it expected (its jobs held by the circuit,
		// say) does not leave the route idle.
		ahead = max(ahead-(p.served.Load()-served), 0)
		later := min(time.Duration(ahead)*p.set.Interval(), 4*r.wait)
		return r.snooze(route, p.expected(r.now())+later, r.now().Sub(start))
	case <-ctx.Done():
		return river.JobSnooze(0)
	}
	defer func() { <-p.turn }()
	err := r.token(ctx, p, route, start, t)
	if err == nil {
		p.served.Add(1)
		r.metrics.rateWaited(route, r.now().Sub(start))
	}
	return err
}

// token gives the head of p's line one token: one left of the last take,
// or a new take. It waits for the next token while that is due before
// deadline fires, and snoozes the job otherwise.
func (r *rates) token(ctx context.Context, p *pace, route string, start time.Time, deadline *time.Timer) error {
	for {
		now := r.now()
		if p.tokens > 0 && now.Sub(p.tokensAt) < tokenLife(p.set) {
			p.tokens--
			return nil
		}
		p.tokens = 0
		if next := time.Unix(0, p.nextAt.Load()); now.Before(next) {
			if err := r.sleep(ctx, route, next, start, deadline); err != nil {
				return err
			}
			continue
		}
		g, err := r.store.RateTake(ctx, route, p.set, int(min(max(p.waiting.Load(), 1), int64(p.lease))))
		if err != nil {
			r.logger.Warn("could not take a token of the route's rate; the job waits", slog.String("route", route), slog.String("error", err.Error()))
			return r.snooze(route, breakerRefresh, r.now().Sub(start))
		}
		now = r.now()
		// The database's clock says how long to wait; this one, from when.
		p.nextAt.Store(now.Add(g.NextAt.Sub(g.Now)).UnixNano())
		if g.HeldUntil != nil {
			r.putHold(route, now.Add(g.HeldUntil.Sub(g.Now)))
		}
		if g.Granted > 0 {
			p.tokens, p.tokensAt = g.Granted-1, now
			return nil
		}
	}
}

// sleep waits until at, or returns the snooze of a job whose wait would
// outlast deadline (or whose worker stops).
func (r *rates) sleep(ctx context.Context, route string, at, start time.Time, deadline *time.Timer) error {
	s := time.NewTimer(at.Sub(r.now()))
	defer s.Stop()
	select {
	case <-s.C:
		return nil
	case <-deadline.C:
		return r.snooze(route, at.Sub(r.now()), r.now().Sub(start))
	case <-ctx.Done():
		return river.JobSnooze(0)
	}
}

// expected is when p's next token is free, as last heard, from now.
func (p *pace) expected(now time.Time) time.Duration {
	return max(time.Unix(0, p.nextAt.Load()).Sub(now), 0)
}

// snooze returns the snooze of a job of route held for d, which waited
// waited in this run; both count as time waited for the rate.
func (r *rates) snooze(route string, d, waited time.Duration) error {
	d = max(d, minSnooze)
	r.metrics.rateWaited(route, waited+d)
	return river.JobSnooze(d)
}

// record holds the whole route, on every replica, for the Retry-After of a
// 429 (at most maxRouteHold). The 429'd attempt itself counts as any
// retryable answer; the deliveries it holds spend nothing.
func (r *rates) record(ctx context.Context, route string, o callResult) {
	if o.status != http.StatusTooManyRequests || o.retryAfter <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	d := min(o.retryAfter, cmp.Or(r.holdMax[route], maxRouteHold))
	if _, err := r.store.RateHold(ctx, route, d); err != nil {
		r.logger.Warn("could not hold the route for its Retry-After", slog.String("route", route), slog.String("error", err.Error()))
		return
	}
	r.putHold(route, r.now().Add(d))
	r.logger.Warn("route held: the downstream answered 429 with Retry-After; nothing is sent to it until then",
		slog.String("route", route), slog.Duration("retry_after", d))
}

// held reports whether a Retry-After holds route, and until when, from
// this worker's copy of the holds, read again when older than
// breakerRefresh: a hold another replica set reaches this one within
// that, or at once on a paced route (its take sees the hold).
func (r *rates) held(ctx context.Context, route string) (time.Time, bool) {
	r.mu.Lock()
	stale := r.now().Sub(r.readAt) > breakerRefresh
	r.mu.Unlock()
	if stale && r.refreshing.CompareAndSwap(false, true) {
		defer r.refreshing.Store(false)
		if all, err := r.store.Rates(ctx, r.routes); err == nil {
			now := r.now()
			r.mu.Lock()
			r.holds, r.readAt = map[string]time.Time{}, now
			for name, st := range all {
				if st.HeldUntil != nil {
					r.holds[name] = now.Add(st.HeldUntil.Sub(st.Now))
				}
			}
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.holds[route]
	return until, ok && r.now().Before(until)
}

func (r *rates) putHold(route string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if until.After(r.holds[route]) {
		r.holds[route] = until
	}
}
