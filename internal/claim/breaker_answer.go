package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// breakerLock is the transaction-level advisory lock a change of a route's
// breaker row holds from before it reads the row until it commits; a
// delivered answer takes it shared (BreakerDelivered) before it looks at
// the row. An answer's write never misses a failure whose write is under
// way: it waits for it, then reads the row as that failure left it. Held
// in memory by Postgres: no write of its own.
const breakerLock = `pg_advisory_xact_lock(hashtext('route_breakers'), hashtext($1))`

// breakerLockShared is breakerLock taken shared: delivered answers wait for
// a change under way but not for each other.
const breakerLockShared = `pg_advisory_xact_lock_shared(hashtext('route_breakers'), hashtext($1))`

// BreakerAnswer applies ev, the outcome of an attempt whose answer (or
// error) came in at answered, by this process's clock, to route's breaker
// (see BreakerApply; the breaker is the actor); failure is the class of a
// failed answer, kept as the breaker's last failure when it counts it (a
// status line or a fixed reason, never the downstream's text). The answer's time is
// taken as its age when the write is sent, off the database's clock, so
// replicas whose clocks differ still order their answers right.
func (s *Store) BreakerAnswer(ctx context.Context, route string, ev BreakerEvent, answered time.Time, failure string, set BreakerSettings) (BreakerChange, error) {
	return s.breakerApply(ctx, route, ev, max(time.Since(answered), 0), failure, set, nil)
}

// BreakerDelivered tells route's closed breaker of an attempt that
// delivered, answered at answered (this process's clock): the failures
// answered before it no longer count, and a failure answered before it
// whose write lands later is not counted (see Breaker.Next). It writes
// only when the row counts failures or heard of one answered less than
// remember before this answer; on a route that is healthy it is one round
// trip (a shared advisory lock and an UPDATE that matches no row) and no
// write. It reports whether the row changed.
func (s *Store) BreakerDelivered(ctx context.Context, route string, answered time.Time, remember time.Duration) (bool, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+breakerLockShared, route)
	b.Queue(`UPDATE route_breakers SET
    last_delivered_at = greatest(last_delivered_at, a.at),
    failed_at = ARRAY(SELECT f FROM unnest(failed_at) f WHERE f > a.at ORDER BY f),
    failures = (SELECT count(*) FROM unnest(failed_at) f WHERE f > a.at)
FROM (SELECT now() - make_interval(secs => $2) AS at) a
WHERE route = $1 AND state = 'closed' AND (last_delivered_at IS NULL OR last_delivered_at < a.at)
    AND (failures > 0 OR last_failed_at > a.at - make_interval(secs => $3))`,
		route, max(time.Since(answered), 0).Seconds(), remember.Seconds())
	br := s.db.SendBatch(ctx, b)
	_, err := br.Exec()
	var changed bool
	if err == nil {
		var tag interface{ RowsAffected() int64 }
		tag, err = br.Exec()
		changed = err == nil && tag.RowsAffected() > 0
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("recording a delivery with the breaker of route %s: %w", route, err)
	}
	return changed, nil
}

// nonNil is ts, or an empty slice for nil: failed_at is NOT NULL.
func nonNil(ts []time.Time) []time.Time {
	if ts == nil {
		return []time.Time{}
	}
	return ts
}

// BreakerWake makes route's snoozed delivery jobs available now, as the
// close of its circuit does (BreakerApply), and returns how many. A job
// that read the circuit half-open just before the close may commit its
// snooze (until the probe's lease ends) after the close woke the others;
// waking again a moment later lets it go too.
func (s *Store) BreakerWake(ctx context.Context, route string) (int, error) {
	n, err := s.river().JobWakeSnoozed(ctx, Queue(route))
	if err != nil {
		return 0, fmt.Errorf("waking the held jobs of route %s: %w", route, err)
	}
	return n, nil
}
