package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

// Actions takes operator actions, each audited under the actor and origin
// of the context it is given (claim.WithActor, claim.WithOrigin; the CLI's
// come from CLI).
type Actions struct {
	// Store reads and reopens claims, and writes every action's audit row
	// in the action's own transaction.
	Store *claim.Store
	// Queues pauses and resumes routes' queues (an insert-only River
	// client will do).
	Queues claim.Queues
	// Routes are the configured route names, the only ones that may be
	// paused or resumed.
	Routes []string
	Logger *slog.Logger
}

// NotFoundError is an action on a claim or route that does not exist.
type NotFoundError struct{ Msg string }

func (e *NotFoundError) Error() string { return e.Msg }

// RefusedError is an action the claim's state does not allow: the CLI
// exits non-zero with its message, the API answers 409.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// InvalidError is a request the action cannot take as given (the API
// answers 400).
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// RetryResult is what a retry did.
type RetryResult struct {
	// Deliveries is how many deliveries were reopened, each with a new job.
	Deliveries int `json:"deliveries"`
	// Note says which deliveries were left alone and why; empty if none.
	Note string `json:"note,omitempty"`
}

// Retry reopens one claim's failed deliveries (with force, its completed
// ones too) and queues their jobs, in one transaction with its audit row.
func (a *Actions) Retry(ctx context.Context, provider, eventID string, force bool) (RetryResult, error) {
	var res RetryResult
	err := a.Store.Transact(ctx, func(tx *claim.Store) error {
		n, err := tx.Reopen(ctx, provider, eventID, force)
		if err != nil {
			return err
		}
		res.Deliveries = n
		return Audit(ctx, tx, a.Logger, claim.AuditEntry{Action: ActionRetry, Target: provider + "/" + eventID,
			Detail: map[string]any{"force": force, "deliveries": n}})
	})
	switch {
	case errors.Is(err, claim.ErrNotFound):
		return res, &NotFoundError{fmt.Sprintf("no claim %s/%s", provider, eventID)}
	case errors.Is(err, claim.ErrConflict):
		return res, &RefusedError{a.refusal(ctx, provider, eventID, force, err)}
	case err != nil:
		return res, err
	}
	if _, ds, err := a.Store.Get(ctx, provider, eventID); err == nil {
		res.Note = LeftAlone(ds)
	}
	return res, nil
}

// LeftAlone says which deliveries a retry never reopens, and why: skipped
// ones (another claim holds their business key; --force does not override
// one) and those failed because their business key could not be computed
// (they would run without it). Empty when there are none.
func LeftAlone(ds []claim.Delivery) string {
	var skipped, unkeyed int
	for _, d := range ds {
		switch {
		case d.Status == claim.DeliverySkipped:
			skipped++
		case d.Status == claim.DeliveryFailed && d.BusinessKeyMissing:
			unkeyed++
		}
	}
	var notes []string
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("%s left skipped: another claim holds the business key, and --force does not override a business key",
			Plural(skipped, "delivery", "deliveries")))
	}
	if unkeyed > 0 {
		notes = append(notes, fmt.Sprintf("%s left failed: the business key could not be computed from the event, and a retry would send it without its key",
			Plural(unkeyed, "delivery", "deliveries")))
	}
	return strings.Join(notes, "; ")
}

// refusal explains why a claim was not reopened, from the status the
// refusal carries; for an ignored or failed claim, whose deliveries may be
// left alone for their business key, from its deliveries too.
func (a *Actions) refusal(ctx context.Context, provider, eventID string, force bool, err error) string {
	key := provider + "/" + eventID
	status, _ := claim.ConflictStatus(err)
	var note string
	if status == claim.Ignored || status == claim.Failed {
		if _, ds, gerr := a.Store.Get(ctx, provider, eventID); gerr == nil {
			note = LeftAlone(ds)
		}
	}
	switch {
	case status == claim.Ignored && note != "":
		return fmt.Sprintf("%s is ignored: every delivery was skipped because another claim holds its business key (see claims show); --force does not override a business key", key)
	case status == claim.Failed && note != "":
		return fmt.Sprintf("%s was not retried: %s", key, note)
	case status == claim.Completed && !force:
		return fmt.Sprintf("%s is completed: every delivery succeeded; pass --force to run them all again (same Idempotency-Keys, so a deduplicating downstream will not repeat the effect)", key)
	case status == claim.Processing:
		return fmt.Sprintf("%s is still processing: its deliveries are queued or being attempted; retry it once it has failed", key)
	case status == claim.Ignored:
		return fmt.Sprintf("%s is ignored: no route matched its event type, so there is nothing to deliver", key)
	}
	return fmt.Sprintf("%s was not retried: %v", key, err)
}

// BulkResult is what a bulk retry did, or would do in a dry run.
type BulkResult struct {
	// Matched counts the claims the filters matched.
	Matched int `json:"matched"`
	// Reopened counts the claims reopened (0 in a dry run), Deliveries
	// their deliveries.
	Reopened   int  `json:"reopened"`
	Deliveries int  `json:"deliveries"`
	DryRun     bool `json:"dry_run,omitempty"`
	// AsOf is the database's time of a dry run's count; a bulk retry
	// confirmed on the dry run carries it back with Matched (Confirmed).
	AsOf *time.Time `json:"as_of,omitempty"`
}

// Confirmed is the dry run a bulk retry was confirmed on: how many claims
// it counted, and when.
type Confirmed struct {
	Matched int
	AsOf    time.Time
}

// ChangedError is a bulk retry whose filters match another number of
// failed claims than the dry run it was confirmed on counted (more failed
// meanwhile, or some were retried): nothing was reopened. Matched and AsOf
// are the new count, for a fresh confirmation. The API answers 409.
type ChangedError struct {
	Confirmed, Matched int
	AsOf               time.Time
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("nothing was reopened: the confirmation counted %s, and %d match the filters now; confirm again",
		Plural(e.Confirmed, "failed claim", "failed claims"), e.Matched)
}

// BulkRetry reopens every failed claim f matches (f.Status must be failed
// or empty, which means failed), paging through all of them; with dryRun
// it only counts them. A bulk retry is one transaction with its audit row
// (the filters and the totals): if the row cannot be written, or anything
// fails on the way, no claim is reopened. It holds the reopened claims'
// row locks until it commits, which on failed claims only blocks other
// retries of them. With confirmed (the dry run it was confirmed on), it
// reopens only the claims that dry run counted: none, with a
// *ChangedError, when the filters match another number of failed claims
// now, and never one that failed after it. reopened, when not nil, is
// called for each claim reopened, once the transaction has committed.
func (a *Actions) BulkRetry(ctx context.Context, f claim.Search, force, dryRun bool, confirmed *Confirmed, reopened func(k claim.EventKey, deliveries int)) (BulkResult, error) {
	if f.Status != "" && f.Status != claim.Failed {
		return BulkResult{}, &InvalidError{fmt.Sprintf("status %q: only failed claims can be retried in bulk", f.Status)}
	}
	f.Status, f.After, f.Limit, f.ChangedUpTo = claim.Failed, nil, 0, time.Time{}
	res := BulkResult{DryRun: dryRun}
	if dryRun {
		n, asOf, err := a.Store.CountClaimsAsOf(ctx, f)
		res.Matched, res.AsOf = n, &asOf
		return res, err // a dry run changes nothing, and is no action to audit
	}
	type done struct {
		k claim.EventKey
		n int
	}
	var reopenedClaims []done
	err := a.Store.Transact(ctx, func(tx *claim.Store) error {
		reopenedClaims = reopenedClaims[:0]
		f := f
		if confirmed != nil {
			n, asOf, err := tx.CountClaimsAsOf(ctx, f)
			if err != nil {
				return err
			}
			if n != confirmed.Matched {
				return &ChangedError{Confirmed: confirmed.Matched, Matched: n, AsOf: asOf}
			}
			f.ChangedUpTo = confirmed.AsOf
		}
		var err error
		res.Matched, res.Reopened, res.Deliveries, err = tx.ReopenMatching(ctx, f, force, func(k claim.EventKey, n int) {
			reopenedClaims = append(reopenedClaims, done{k, n})
		})
		if err != nil {
			return err
		}
		return Audit(ctx, tx, a.Logger, claim.AuditEntry{Action: ActionBulkRetry, Target: "claims", Detail: map[string]any{
			"filters": describe(f), "force": force, "matched": res.Matched, "reopened": res.Reopened, "deliveries": res.Deliveries}})
	})
	var changed *ChangedError
	if errors.As(err, &changed) {
		return BulkResult{}, changed
	}
	if err != nil {
		return BulkResult{}, fmt.Errorf("no claim was reopened: %w", err)
	}
	if reopened != nil {
		for _, d := range reopenedClaims {
			reopened(d.k, d.n)
		}
	}
	return res, nil
}

// describe lists the filters f sets, for the audit.
func describe(f claim.Search) map[string]string {
	m := map[string]string{"status": string(f.Status)}
	for k, v := range map[string]string{"provider": f.Provider, "route": f.Route, "type": f.Type,
		"event_id": f.EventIDPrefix, "business_key": f.BusinessKey} {
		if v != "" {
			m[k] = v
		}
	}
	if f.EventIDContains != "" {
		m["event_id"] = "*" + f.EventIDContains + "*"
	}
	if !f.Since.IsZero() {
		m["since"] = f.Since.UTC().Format("2006-01-02T15:04:05.999999Z07:00")
	}
	if !f.Before.IsZero() {
		m["before"] = f.Before.UTC().Format("2006-01-02T15:04:05.999999Z07:00")
	}
	return m
}

// checkRoute refuses a route that is not configured.
func (a *Actions) checkRoute(name string) error {
	if slices.Contains(a.Routes, name) {
		return nil
	}
	shown := name
	if r := []rune(shown); len(r) > 64 {
		shown = string(r[:63]) + "…"
	}
	return &NotFoundError{fmt.Sprintf("no route %q in the configuration (routes: %s)", shown, strings.Join(a.Routes, ", "))}
}

// PauseRoute pauses a configured route's queue on every worker, in one
// transaction with its audit row: no row, no pause.
func (a *Actions) PauseRoute(ctx context.Context, name string) error {
	if err := a.checkRoute(name); err != nil {
		return err
	}
	return a.Store.Transact(ctx, func(tx *claim.Store) error {
		if err := tx.PauseRoute(ctx, a.Queues, name); err != nil {
			return err
		}
		return Audit(ctx, tx, a.Logger, claim.AuditEntry{Action: ActionPause, Target: name})
	})
}

// ResumeRoute resumes a configured route's queue, in one transaction with
// its audit row, and reports whether it was paused.
func (a *Actions) ResumeRoute(ctx context.Context, name string) (wasPaused bool, err error) {
	if err := a.checkRoute(name); err != nil {
		return false, err
	}
	err = a.Store.Transact(ctx, func(tx *claim.Store) error {
		var err error
		if wasPaused, err = tx.ResumeRoute(ctx, a.Queues, name); err != nil {
			return err
		}
		return Audit(ctx, tx, a.Logger, claim.AuditEntry{Action: ActionResume, Target: name, Detail: map[string]any{"was_paused": wasPaused}})
	})
	return wasPaused, err
}

// CloseBreaker closes a configured route's circuit breaker by hand, on
// every worker (its state is in Postgres), and makes the route's waiting
// deliveries available at once. It is audited in the same
// transaction, also when the circuit was already closed; it reports
// whether it was open or half-open.
func (a *Actions) CloseBreaker(ctx context.Context, name string) (wasOpen bool, err error) {
	if err := a.checkRoute(name); err != nil {
		return false, err
	}
	err = a.Store.Transact(ctx, func(tx *claim.Store) error {
		ch, err := tx.BreakerApply(ctx, name, claim.BreakerClosedByHand, claim.BreakerSettings{}, map[string]any{"was_open": true})
		if err != nil {
			return err
		}
		if wasOpen = ch.Action != ""; wasOpen {
			return nil
		}
		return tx.Audit(ctx, claim.AuditEntry{Action: claim.ActionBreakerClose, Target: name, Detail: map[string]any{"was_open": false}})
	})
	if err != nil {
		return false, err
	}
	if a.Logger != nil {
		a.Logger.Info("audit", slog.String("actor", claim.ActorOf(ctx)), slog.String("origin", claim.OriginOf(ctx)), slog.String("action", claim.ActionBreakerClose),
			slog.String("target", name), slog.Bool("was_open", wasOpen))
	}
	return wasOpen, nil
}

// Plural is n and the word for it: "1 delivery", "2 deliveries".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
