package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// BreakerState is where a route's circuit breaker stands.
type BreakerState string

// Breaker states.
const (
	// BreakerClosed: deliveries are sent; consecutive attempts that did not
	// deliver are counted.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: nothing is sent until NextProbeAt.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: one delivery, the probe, is being sent; the others
	// wait for its outcome.
	BreakerHalfOpen BreakerState = "half_open"
)

// ActorBreaker is the audit actor of the breaker's own changes of state.
const ActorBreaker = "breaker"

// Audit actions of breakers.
const (
	ActionBreakerOpen     = "breaker_open"
	ActionBreakerHalfOpen = "breaker_half_open"
	ActionBreakerClose    = "breaker_close"
)

// Breaker is one route's circuit breaker, as stored in route_breakers.
type Breaker struct {
	State BreakerState `json:"state"`
	// Since is when the state began; nil for a route whose breaker never
	// counted a failure.
	Since *time.Time `json:"since"`
	// Failures counts the consecutive attempts that did not deliver.
	Failures int `json:"failures"`
	// NextProbeAt is when an open circuit lets one probe through; nil
	// when closed.
	NextProbeAt *time.Time `json:"next_probe_at"`
	// CoolDown is the current wait between probes.
	CoolDown time.Duration `json:"-"`
	// ProbeUntil is the end of a half-open circuit's probe lease.
	ProbeUntil *time.Time `json:"-"`
	// Now is the database's time when the row was read.
	Now time.Time `json:"-"`
	// FailedAt are the answer times of the failures a closed circuit
	// counts, Failures of them; LastDeliveredAt is the newest delivered
	// answer the breaker heard of, and LastFailedAt the newest failure,
	// counted or not (see Next). Times of the database's clock.
	FailedAt        []time.Time `json:"-"`
	LastDeliveredAt *time.Time  `json:"-"`
	LastFailedAt    *time.Time  `json:"-"`
}

// BreakerSettings are a route's breaker settings (config.Breaker).
type BreakerSettings struct {
	Failures              int
	CoolDown, MaxCoolDown time.Duration
}

// BreakerEvent is what happened to a route that its breaker hears of.
type BreakerEvent int

// Breaker events.
const (
	// BreakerFailed: an attempt did not deliver (not a probe).
	BreakerFailed BreakerEvent = iota + 1
	// BreakerProbeFailed: the probe did not deliver.
	BreakerProbeFailed
	// BreakerProbeDelivered: the probe delivered.
	BreakerProbeDelivered
	// BreakerProbeReleased: the probe ended with no verdict on the route
	// (nothing sent, or a rejection): another may probe at once.
	BreakerProbeReleased
	// BreakerClosedByHand: an operator closed the circuit.
	BreakerClosedByHand
	// BreakerDelivered: an attempt delivered (not a probe).
	BreakerDelivered
)

// Next is the pure transition of b on ev, an answer that came in at answered, at
// the database's time now, with the route's settings s: the state the row
// takes, and the audit action of the change of state ("" when the state
// does not change).
//
// A closed circuit counts failures in the order the answers came in, not
// the order their writes arrive: a delivered answer drops the failures
// answered before it (and none answered after it), and a failure answered
// before the last delivered answer is not counted. So a downstream that
// alternates failures and deliveries never reaches the threshold, however
// the writes of concurrent attempts and replicas interleave.
func (b Breaker) Next(ev BreakerEvent, answered time.Time, s BreakerSettings, now time.Time) (Breaker, string) {
	n := b
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	open := func(cd time.Duration) (Breaker, string) {
		n.State, n.Since, n.CoolDown, n.NextProbeAt, n.ProbeUntil = BreakerOpen, &now, cd, at(cd), nil
		return n, ActionBreakerOpen
	}
	closed := func() (Breaker, string) {
		n.State, n.Since, n.Failures, n.CoolDown, n.NextProbeAt, n.ProbeUntil = BreakerClosed, &now, 0, 0, nil, nil
		n.FailedAt = nil
		return n, ActionBreakerClose
	}
	switch ev {
	case BreakerDelivered:
		n.LastDeliveredAt = latest(b.LastDeliveredAt, answered)
		if b.State == BreakerClosed {
			n.FailedAt = nil
			for _, f := range b.FailedAt {
				if f.After(answered) {
					n.FailedAt = append(n.FailedAt, f)
				}
			}
			n.Failures = len(n.FailedAt)
		}
		return n, ""
	case BreakerFailed:
		if b.State != BreakerClosed {
			return b, "" // sent before the circuit opened; already counted in
		}
		n.LastFailedAt = latest(b.LastFailedAt, answered)
		if b.LastDeliveredAt != nil && !answered.After(*b.LastDeliveredAt) {
			return n, "" // a delivery answered after it already came in
		}
		n.FailedAt = append(slices.Clone(b.FailedAt), answered)
		n.Failures = len(n.FailedAt)
		if n.Since == nil {
			n.Since = &now
		}
		if n.Failures >= s.Failures {
			return open(s.CoolDown)
		}
		return n, ""
	case BreakerProbeFailed:
		if b.State != BreakerHalfOpen {
			return b, ""
		}
		n.Failures++
		return open(min(max(2*b.CoolDown, s.CoolDown), s.MaxCoolDown))
	case BreakerProbeDelivered:
		if b.State != BreakerHalfOpen {
			return b, ""
		}
		n.LastDeliveredAt = latest(b.LastDeliveredAt, answered)
		return closed()
	case BreakerProbeReleased:
		if b.State == BreakerHalfOpen {
			n.ProbeUntil = &now
		}
		return n, ""
	case BreakerClosedByHand:
		if b.State == BreakerClosed {
			return b, ""
		}
		return closed()
	}
	return b, ""
}

// latest is the later of t and u.
func latest(t *time.Time, u time.Time) *time.Time {
	if t != nil && t.After(u) {
		return t
	}
	return &u
}

// breakerColumns are a Breaker's stored columns, and the database's time.
const breakerColumns = `state, since, failures, cool_down_ms, next_probe_at, probe_until, now(),
    failed_at, last_delivered_at, last_failed_at`

func scanBreaker(row pgx.Row, before ...any) (Breaker, error) {
	var b Breaker
	var ms int64
	var since time.Time
	err := row.Scan(append(before, &b.State, &since, &b.Failures, &ms, &b.NextProbeAt, &b.ProbeUntil, &b.Now,
		&b.FailedAt, &b.LastDeliveredAt, &b.LastFailedAt)...)
	b.Since, b.CoolDown = &since, time.Duration(ms)*time.Millisecond
	return b, err
}

// Breakers returns the breakers of routes, by name; a route without a
// row is closed, with no failures.
func (s *Store) Breakers(ctx context.Context, routes []string) (map[string]Breaker, error) {
	rows, err := s.db.Query(ctx, `SELECT route, `+breakerColumns+` FROM route_breakers WHERE route = ANY($1)`, routes)
	if err != nil {
		return nil, fmt.Errorf("reading breakers: %w", err)
	}
	defer rows.Close()
	out := make(map[string]Breaker, len(routes))
	for _, r := range routes {
		out[r] = Breaker{State: BreakerClosed}
	}
	for rows.Next() {
		var route string
		b, err := scanBreaker(rows, &route)
		if err != nil {
			return nil, fmt.Errorf("reading breakers: %w", err)
		}
		out[route] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading breakers: %w", err)
	}
	return out, nil
}

// BreakerChange is a breaker's transition as BreakerApply made it.
type BreakerChange struct {
	Breaker
	// Action is the audit action written; "" when the state did not change.
	Action string
}

// BreakerApply applies ev to route's breaker in one transaction: the row
// is locked (made first, closed, if the route has none), the transition
// (Breaker.Next) computed at the database's time, the row written, and a
// change of state audited with detail: under the actor and origin of ctx
// for a circuit closed by hand (BreakerClosedByHand), under ActorBreaker
// and no origin for the breaker's own. A change to closed makes the
// route's waiting (snoozed) delivery jobs available at once, so that they
// flow without waiting out their snooze.
func (s *Store) BreakerApply(ctx context.Context, route string, ev BreakerEvent, set BreakerSettings, detail map[string]any) (BreakerChange, error) {
	return s.breakerApply(ctx, route, ev, 0, set, detail)
}

// breakerApply is BreakerApply for an answer that came in age before its
// write is sent (0: now).
func (s *Store) breakerApply(ctx context.Context, route string, ev BreakerEvent, age time.Duration, set BreakerSettings, detail map[string]any) (BreakerChange, error) {
	if ev != BreakerClosedByHand {
		ctx = breakerOwn(ctx)
	}
	var ch BreakerChange
	err := s.inTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT `+breakerLock, route); err != nil {
			return err
		}
		if _, err := tx.db.Exec(ctx, `INSERT INTO route_breakers (route) VALUES ($1) ON CONFLICT (route) DO NOTHING`, route); err != nil {
			return err
		}
		b, err := scanBreaker(tx.db.QueryRow(ctx, `SELECT `+breakerColumns+` FROM route_breakers WHERE route = $1 FOR UPDATE`, route))
		if err != nil {
			return err
		}
		n, action := b.Next(ev, b.Now.Add(-age), set, b.Now)
		ch = BreakerChange{Breaker: n, Action: action}
		if n.Failures == b.Failures && action == "" && timesEqual(n.ProbeUntil, b.ProbeUntil) &&
			timesEqual(n.LastDeliveredAt, b.LastDeliveredAt) && timesEqual(n.LastFailedAt, b.LastFailedAt) {
			return nil
		}
		if _, err := tx.db.Exec(ctx, `UPDATE route_breakers SET state = $2, since = $3, failures = $4, cool_down_ms = $5,
    next_probe_at = $6, probe_until = $7, failed_at = $8, last_delivered_at = $9, last_failed_at = $10 WHERE route = $1`,
			route, n.State, *n.Since, n.Failures, n.CoolDown.Milliseconds(), n.NextProbeAt, n.ProbeUntil,
			nonNil(n.FailedAt), n.LastDeliveredAt, n.LastFailedAt); err != nil {
			return err
		}
		if action == "" {
			return nil
		}
		if err := tx.auditBreaker(ctx, action, route, n, detail); err != nil {
			return err
		}
		if n.State == BreakerClosed {
			_, err = tx.river().JobWakeSnoozed(ctx, Queue(route))
		}
		return err
	})
	if err != nil {
		return BreakerChange{}, fmt.Errorf("updating the breaker of route %s: %w", route, err)
	}
	return ch, nil
}

// breakerOwn is ctx for the breaker's own changes of state: its actor is
// ActorBreaker, with no origin, whoever's delivery caused them.
func breakerOwn(ctx context.Context) context.Context {
	return WithOrigin(WithActor(ctx, ActorBreaker), "")
}

// auditBreaker writes the audit row of a breaker's change of state, under
// the actor and origin of ctx.
func (s *Store) auditBreaker(ctx context.Context, action, route string, b Breaker, detail map[string]any) error {
	d := map[string]any{"state": b.State, "failures": b.Failures}
	if b.NextProbeAt != nil {
		d["next_probe_at"] = b.NextProbeAt.UTC().Format(time.RFC3339Nano)
		d["cool_down"] = b.CoolDown.String()
	}
	for k, v := range detail {
		d[k] = v
	}
	return s.Audit(ctx, AuditEntry{Action: action, Target: route, Detail: d})
}

// BreakerProbe grants the probe of route's circuit when it is due: open
// past its NextProbeAt, or half-open with an expired lease (its prober
// died). The circuit is half-open, leased until lease from now, when
// granted. One conditional UPDATE decides, so that among all replicas
// exactly one delivery gets the probe. It returns the breaker as it is.
func (s *Store) BreakerProbe(ctx context.Context, route string, lease time.Duration) (granted bool, b Breaker, err error) {
	err = s.inTx(ctx, func(tx *Store) error {
		b, err = scanBreaker(tx.db.QueryRow(ctx, `UPDATE route_breakers SET
    since = CASE WHEN state = 'open' THEN now() ELSE since END,
    state = 'half_open', probe_until = now() + make_interval(secs => $2)
WHERE route = $1 AND (state = 'open' AND next_probe_at <= now() OR state = 'half_open' AND probe_until <= now())
RETURNING `+breakerColumns, route, lease.Seconds()))
		if errors.Is(err, pgx.ErrNoRows) {
			got, rerr := tx.Breakers(ctx, []string{route})
			b, err = got[route], rerr
			return err
		}
		if err != nil {
			return err
		}
		granted = true
		if !b.Since.Equal(b.Now) {
			return nil // a lease taken over: no change of state
		}
		return tx.auditBreaker(breakerOwn(ctx), ActionBreakerHalfOpen, route, b, nil)
	})
	if err != nil {
		return false, Breaker{}, fmt.Errorf("probing the breaker of route %s: %w", route, err)
	}
	return granted, b, nil
}

func timesEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
