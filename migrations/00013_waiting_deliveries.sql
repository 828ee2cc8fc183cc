-- +goose Up

-- A delivery may now wait: its route runs after others (after: in the
-- config), so it is created with no job and released, in the transaction
-- that completes the last of its predecessors, to processing with a job.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('processing', 'waiting', 'completed', 'failed', 'skipped'));

-- The routes whose deliveries of the same claim must complete before this
-- one runs, as they were configured when the event was claimed: the
-- database decides a release on its own (the end statement, a retry, the
-- reconciler) without the configuration that made the chain. Empty for a
-- delivery that waits for nothing.
ALTER TABLE webhook_deliveries ADD COLUMN waits_for text[] NOT NULL DEFAULT '{}';

-- Serves the reconciler and the waiting gauge: waiting deliveries, oldest
-- first, without scanning settled ones.
CREATE INDEX webhook_deliveries_waiting_idx
    ON webhook_deliveries (updated_at) WHERE status = 'waiting';

-- +goose Down
DROP INDEX webhook_deliveries_waiting_idx;
ALTER TABLE webhook_deliveries DROP COLUMN waits_for;
UPDATE webhook_deliveries SET status = 'processing' WHERE status = 'waiting';
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('processing', 'completed', 'failed', 'skipped'));
