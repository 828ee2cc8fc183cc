package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReconcileRun is one reconciliation run of one provider, as it is
// recorded (reconcile_runs) and presented by the API, the console and
// `worker reconcile --runs`.
type ReconcileRun struct {
	ID       int64  `json:"id"`
	Provider string `json:"provider"`
	// Trigger is what started the run: schedule, cli or api.
	Trigger string `json:"trigger"`
	// Actor is the operator who asked for it (api), else "".
	Actor      string     `json:"actor,omitempty"`
	DryRun     bool       `json:"dry_run"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Since is the start of the window the run listed.
	Since time.Time `json:"since"`
	// Newest is when the newest event (or delivery) the run listed was
	// created; the next run starts a minute before it.
	Newest *time.Time `json:"newest,omitempty"`
	// Listed is how many events or deliveries the provider's API listed;
	// Claimed how many were claimed (Stripe), Redelivered how many
	// redeliveries were asked for (GitHub), Skipped how many were left
	// alone, already claimed or delivered.
	Listed      int `json:"listed"`
	Claimed     int `json:"claimed"`
	Redelivered int `json:"redelivered"`
	Skipped     int `json:"skipped"`
	// Error is why the run failed, "" when it did not.
	Error string `json:"error,omitempty"`
}

// Run triggers (ReconcileRun.Trigger).
const (
	TriggerSchedule = "schedule"
	TriggerCLI      = "cli"
	TriggerAPI      = "api"
)

// ErrReconcileRunning is returned by LockReconcile when another run of the
// provider holds its lock.
var ErrReconcileRunning = errors.New("a reconciliation of the provider is already running")

const reconcileRunColumns = `id, provider, trigger, coalesce(actor, ''), dry_run, started_at, finished_at, since, newest,
    listed, claimed, redelivered, skipped, coalesce(error, '')`

// StartReconcileRun records that run starts now and returns it with its id
// and start time.
func (s *Store) StartReconcileRun(ctx context.Context, run ReconcileRun) (ReconcileRun, error) {
	err := s.db.QueryRow(ctx, `INSERT INTO reconcile_runs (provider, trigger, actor, dry_run, since)
VALUES ($1, $2, NULLIF($3, ''), $4, $5) RETURNING id, started_at`,
		run.Provider, run.Trigger, run.Actor, run.DryRun, run.Since).Scan(&run.ID, &run.StartedAt)
	if err != nil {
		return run, fmt.Errorf("recording the start of a reconciliation of %s: %w", run.Provider, err)
	}
	return run, nil
}

// FinishReconcileRun records what run saw and did, and that it ended now.
func (s *Store) FinishReconcileRun(ctx context.Context, run ReconcileRun) error {
	_, err := s.db.Exec(ctx, `UPDATE reconcile_runs SET finished_at = now(), newest = $2, listed = $3, claimed = $4,
    redelivered = $5, skipped = $6, error = NULLIF($7, '')
WHERE id = $1`, run.ID, run.Newest, run.Listed, run.Claimed, run.Redelivered, run.Skipped, run.Error)
	if err != nil {
		return fmt.Errorf("recording the end of reconciliation run %d of %s: %w", run.ID, run.Provider, err)
	}
	return nil
}

// ReconcileCursor returns the newest event time the provider's finished,
// successful, not dry runs saw: where the next run's window starts (less
// its overlap). It returns nil before the first such run.
func (s *Store) ReconcileCursor(ctx context.Context, provider string) (*time.Time, error) {
	var newest *time.Time
	err := s.db.QueryRow(ctx, `SELECT max(newest) FROM reconcile_runs
WHERE provider = $1 AND finished_at IS NOT NULL AND error IS NULL AND NOT dry_run`, provider).Scan(&newest)
	if err != nil {
		return nil, fmt.Errorf("reading where the reconciliation of %s stopped: %w", provider, err)
	}
	return newest, nil
}

// ReconcileRuns returns the newest runs, of provider when it is not "",
// at most limit (0 means 50).
func (s *Store) ReconcileRuns(ctx context.Context, provider string, limit int) ([]ReconcileRun, error) {
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.db.Query(ctx, `SELECT `+reconcileRunColumns+` FROM reconcile_runs
WHERE $1 = '' OR provider = $1
ORDER BY started_at DESC, id DESC LIMIT $2`, provider, limit)
	if err != nil {
		return nil, fmt.Errorf("listing reconciliation runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ReconcileRun])
	if err != nil {
		return nil, fmt.Errorf("listing reconciliation runs: %w", err)
	}
	return runs, nil
}

// LockReconcile runs fn while it holds the provider's reconciliation lock,
// a transaction-scoped advisory lock shared by every worker of the
// database, so that two runs of one provider never overlap; a run that
// finds it held returns ErrReconcileRunning without calling fn. The lock
// goes with the transaction, however the worker ends: a killed worker's
// connection closes and releases it. The transaction holds one connection
// and writes nothing; fn does its work on others.
func (s *Store) LockReconcile(ctx context.Context, provider string, fn func(ctx context.Context) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("locking the reconciliation of %s: %w", provider, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // it only held the lock
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('hookgate.reconcile/' || $1, 0))`,
		provider).Scan(&got); err != nil {
		return fmt.Errorf("locking the reconciliation of %s: %w", provider, err)
	}
	if !got {
		return ErrReconcileRunning
	}
	return fn(ctx)
}

// deleteReconcileRunsSQL deletes a batch of runs started before $1.
const deleteReconcileRunsSQL = `DELETE FROM reconcile_runs WHERE id = ANY (ARRAY(
    SELECT id FROM reconcile_runs WHERE started_at < $1 ORDER BY started_at LIMIT $2))`

// pruneReconcileRuns deletes the runs started before cut, a batch per
// statement, and returns how many.
func (s *Store) pruneReconcileRuns(ctx context.Context, cut time.Time, batch int) (int, error) {
	deleted := 0
	for {
		tag, err := s.db.Exec(ctx, deleteReconcileRunsSQL, cut, batch)
		if err != nil {
			return deleted, fmt.Errorf("deleting reconciliation runs after %d: %w", deleted, err)
		}
		deleted += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(batch) {
			return deleted, nil
		}
	}
}

// ClaimedIDs returns which of ids the provider has a claim for: one
// primary-key probe each, for reconciliation to leave those alone.
func (s *Store) ClaimedIDs(ctx context.Context, provider string, ids []string) (map[string]bool, error) {
	rows, err := s.db.Query(ctx, `SELECT event_id FROM webhook_event_claims WHERE provider = $1 AND event_id = ANY($2::text[])`,
		provider, ids)
	if err != nil {
		return nil, fmt.Errorf("looking up %d claims of %s: %w", len(ids), provider, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("looking up %d claims of %s: %w", len(ids), provider, err)
	}
	claimed := make(map[string]bool, len(found))
	for _, id := range found {
		claimed[id] = true
	}
	return claimed, nil
}
