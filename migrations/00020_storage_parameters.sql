-- +goose NO TRANSACTION
-- +goose Up

-- Storage parameters for the tables a day of traffic grows: how often
-- autovacuum visits them. Storage parameters only: no column, index or
-- constraint changes, and River's schema is left as River made it
-- (river_job gets parameters, as any table may).
--
-- Postgres' defaults wait for a fifth of a table to be dead (or newly
-- inserted) rows before autovacuum visits it. On tables that only grow for
-- the retention window (90 days of claims by default), that is days of
-- dead row versions between two visits: every claim and delivery leaves
-- one when it completes, and each is still in every index the statements
-- of the hot paths walk. A hundredth keeps the dead share small at any
-- size, and keeps the visibility map and the planner's statistics current
-- for the insert-only history (docs/benchmarks.md, "Cost at scale").
--
-- river_job's rows are inserted, updated when River fetches them and
-- deleted when their delivery ends (docs/architecture.md), so the table
-- stays near the jobs in flight while dead rows pass through it by the
-- thousand: a visit after every thousand dead rows keeps its indexes from
-- carrying more dead entries than live ones.
--
-- No fill factor: no update of these tables can be HOT (each changes an
-- indexed column: a status, a state), so room kept free on a page saved
-- nothing measurable (each event's WAL within 1 %) and cost 12-15 % more
-- heap (BenchmarkDay).
--
-- ALTER TABLE … SET takes SHARE UPDATE EXCLUSIVE, which blocks neither
-- reads nor writes, but conflicts with an autovacuum of the table. As in
-- 00016, the wait for an autovacuum to be cancelled (after
-- deadlock_timeout) is given at least a minute, so that the lock_timeout
-- docs/operations.md has migrations run with does not end it, and nobody
-- waits behind it. One table a statement, each in its own transaction:
-- every statement can run again.

-- +goose StatementBegin
DO $$
DECLARE
    writers_wait text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', CASE WHEN writers_wait::interval = interval '0'
        OR writers_wait::interval > interval '1 min' THEN writers_wait ELSE '1min' END, true);
    ALTER TABLE webhook_event_claims SET (
        autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01,
        autovacuum_analyze_scale_factor = 0.01);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    writers_wait text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', CASE WHEN writers_wait::interval = interval '0'
        OR writers_wait::interval > interval '1 min' THEN writers_wait ELSE '1min' END, true);
    ALTER TABLE webhook_deliveries SET (
        autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01,
        autovacuum_analyze_scale_factor = 0.01);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    writers_wait text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', CASE WHEN writers_wait::interval = interval '0'
        OR writers_wait::interval > interval '1 min' THEN writers_wait ELSE '1min' END, true);
    ALTER TABLE webhook_attempts SET (
        autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01,
        autovacuum_analyze_scale_factor = 0.01);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    writers_wait text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', CASE WHEN writers_wait::interval = interval '0'
        OR writers_wait::interval > interval '1 min' THEN writers_wait ELSE '1min' END, true);
    ALTER TABLE river_job SET (
        autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.05);
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE river_job RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor);
ALTER TABLE webhook_attempts RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor);
ALTER TABLE webhook_deliveries RESET (autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE webhook_event_claims RESET (autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor);
