package claim

import (
	"context"
	"errors"
	"fmt"
)

// Claim records ev and fans it out to routes (the names of the routes its
// type matches): a batch of one (see ClaimMany) and then Resolve, as
// ingest's group does for each of its events. Reconciliation claims the
// events a provider's API returns through it, one at a time, so that they
// pass the same gate as a webhook. Only the call that inserts the claim
// fans out; any other call for the same key is a Duplicate, except that
// with reopen a failed claim has its failed deliveries reopened. Nothing
// is committed when an error is returned; an event holding text the
// tables cannot store fails with ErrUnstorable, before any statement.
func (s *Store) Claim(ctx context.Context, ev Event, routes []string, reopen bool) (Result, error) {
	if err := Storable(ev, routes); err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	req := Request{Event: ev, Routes: routes}
	res, err := s.ClaimMany(ctx, []Request{req})
	if err != nil {
		return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
	}
	return s.Resolve(ctx, req, reopen, res[0])
}

// Resolve finishes, alone, what ClaimMany left to a single event in res:
// with reopen, it reopens the failed claim of a duplicate (in a transaction
// of its own, which locks the claim and reads its deliveries); it claims
// anew an event whose claim was deleted while the batch read it. Any other
// result is returned as it is.
func (s *Store) Resolve(ctx context.Context, req Request, reopen bool, res Result) (Result, error) {
	ev := req.Event
	for try := 0; ; try++ {
		switch {
		case res.Decision != Duplicate:
			return res, nil
		case reopen && res.Status == Failed:
			var n int
			err := s.inTx(ctx, func(tx *Store) (err error) {
				n, err = tx.reopenTx(ctx, ev.Provider, ev.ID, false, ev.JobMetadata)
				return err
			})
			var conflict *statusConflict
			switch {
			case err == nil:
				return Result{Decision: Reopened, Status: Processing, Deliveries: n}, nil
			case errors.As(err, &conflict):
				// The status reopenTx read is the duplicate's answer.
				return Result{Decision: Duplicate, Status: conflict.status}, nil
			case !errors.Is(err, ErrNotFound):
				return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
			}
			// Deleted by retention since the batch saw it: claimed anew.
		case res.Status != "":
			return res, nil
		}
		if try == 2 {
			return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, errVanished)
		}
		again, err := s.ClaimMany(ctx, []Request{req})
		if err != nil {
			return Result{}, fmt.Errorf("claiming event %s/%s: %w", ev.Provider, ev.ID, err)
		}
		res = again[0]
	}
}

// errVanished is the claim a duplicate saw being deleted (by retention)
// before its status could be read.
var errVanished = errors.New("the claim was deleted while it was being read; try again")
