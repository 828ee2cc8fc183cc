package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

// Cell is one cell's actions: an action on a claim or a route is taken in
// its provider's cell, and audited there.
type Cell struct {
	Name    string
	Actions *Actions
}

// UnavailableError is a bulk retry that could not reach every cell:
// nothing was reopened in any. The API answers 503.
type UnavailableError struct {
	Cell string
	Err  error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("cell %s cannot be reached, and a bulk retry needs every cell: no claim was reopened", e.Cell)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// BulkRetryCells is BulkRetry over every cell of cells; with one, it is
// that cell's BulkRetry. A dry run adds up each cell's count, its as_of
// the latest of theirs. The retry holds a transaction open in every cell
// at once: the confirmed count is checked against the sum of the cells'
// counts in them (nothing is reopened anywhere when it differs, with a
// *ChangedError carrying the new sum), then each cell reopens its own
// matches, never one changed after the dry run's as_of (the latest of the
// cells' clocks: a claim that failed in a cell whose clock is behind by
// less than the skew may be counted as before it, and then it also changed
// the sum, which refuses the retry), and writes its own
// audit row with its own figures, and the cells commit one after the
// other. A cell that cannot be reached fails the whole retry
// (*UnavailableError) before anything is reopened. There is no two-phase
// commit: a cell whose commit fails after another's succeeded is reported
// with the error, the claims of the cells that committed reopened.
func BulkRetryCells(ctx context.Context, cells []Cell, f claim.Search, force, dryRun bool, confirmed *Confirmed, reopened func(k claim.EventKey, deliveries int)) (BulkResult, error) {
	if len(cells) == 1 {
		return cells[0].Actions.BulkRetry(ctx, f, force, dryRun, confirmed, reopened)
	}
	if f.Status != "" && f.Status != claim.Failed {
		return BulkResult{}, &InvalidError{fmt.Sprintf("status %q: only failed claims can be retried in bulk", f.Status)}
	}
	f.Status, f.After, f.Limit, f.ChangedUpTo = claim.Failed, nil, 0, time.Time{}
	if dryRun {
		return dryRunCells(ctx, cells, f)
	}
	res := BulkResult{}
	var done []func()
	txs := make([]*claim.Store, len(cells))
	err := transactCells(ctx, cells, txs, func() error {
		done = done[:0]
		g := f
		if confirmed != nil {
			n, asOf, err := countCells(ctx, txs, g)
			if err != nil {
				return err
			}
			if n != confirmed.Matched {
				return &ChangedError{Confirmed: confirmed.Matched, Matched: n, AsOf: asOf}
			}
			g.ChangedUpTo = confirmed.AsOf
		}
		res = BulkResult{}
		for i, tx := range txs {
			var cr BulkResult
			var err error
			cr.Matched, cr.Reopened, cr.Deliveries, err = tx.ReopenMatching(ctx, g, force, func(k claim.EventKey, n int) {
				if reopened != nil {
					done = append(done, func() { reopened(k, n) })
				}
			})
			if err != nil {
				return fmt.Errorf("cell %s: %w", cells[i].Name, err)
			}
			if err := Audit(ctx, tx, cells[i].Actions.Logger, claim.AuditEntry{Action: ActionBulkRetry, Target: "claims", Detail: map[string]any{
				"filters": describe(g), "force": force, "matched": cr.Matched, "reopened": cr.Reopened, "deliveries": cr.Deliveries}}); err != nil {
				return fmt.Errorf("cell %s: %w", cells[i].Name, err)
			}
			res.Matched, res.Reopened, res.Deliveries = res.Matched+cr.Matched, res.Reopened+cr.Reopened, res.Deliveries+cr.Deliveries
		}
		return nil
	})
	var changed *ChangedError
	var down *UnavailableError
	switch {
	case errors.As(err, &changed):
		return BulkResult{}, changed
	case errors.As(err, &down):
		return BulkResult{}, down
	case err != nil:
		return BulkResult{}, fmt.Errorf("no claim was reopened: %w", err)
	}
	for _, d := range done {
		d()
	}
	return res, nil
}

// transactCells runs fn with a transaction open in every cell (txs), the
// first cell's outermost: the cells commit in reverse order once fn
// returns nil, and all roll back when it does not.
func transactCells(ctx context.Context, cells []Cell, txs []*claim.Store, fn func() error) error {
	var step func(i int) error
	step = func(i int) error {
		if i == len(cells) {
			return fn()
		}
		began := false
		err := cells[i].Actions.Store.Transact(ctx, func(tx *claim.Store) error {
			began, txs[i] = true, tx
			return step(i + 1)
		})
		if err != nil && !began {
			return &UnavailableError{Cell: cells[i].Name, Err: err}
		}
		return err
	}
	return step(0)
}

// countCells adds up the failed claims f matches in each transaction; the
// time is the latest of the cells'.
func countCells(ctx context.Context, txs []*claim.Store, f claim.Search) (int, time.Time, error) {
	total, latest := 0, time.Time{}
	for _, tx := range txs {
		n, at, err := tx.CountClaimsAsOf(ctx, f)
		if err != nil {
			return 0, time.Time{}, err
		}
		total += n
		if at.After(latest) {
			latest = at
		}
	}
	return total, latest, nil
}

// dryRunCells counts f's matches in every cell at once.
func dryRunCells(ctx context.Context, cells []Cell, f claim.Search) (BulkResult, error) {
	var (
		mu    sync.Mutex
		res   = BulkResult{DryRun: true}
		asOf  time.Time
		wg    sync.WaitGroup
		fails = make([]error, len(cells))
	)
	for i, c := range cells {
		wg.Go(func() {
			n, at, err := c.Actions.Store.CountClaimsAsOf(ctx, f)
			if err != nil {
				fails[i] = &UnavailableError{Cell: c.Name, Err: err}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			res.Matched += n
			if at.After(asOf) {
				asOf = at
			}
		})
	}
	wg.Wait()
	for _, err := range fails {
		if err != nil {
			return BulkResult{}, err
		}
	}
	res.AsOf = &asOf
	return res, nil
}
