-- +goose NO TRANSACTION
-- +goose Up

-- The attempt history's rows leave with their claim through a statement
-- trigger on the claim table, not through a foreign key to the deliveries.
-- The key's check ran once per inserted row, inside the transaction that
-- ends a batch of deliveries (a query of its own per row, and a lock on the
-- delivery row written to the WAL): about half of the history statement's
-- time (EXPLAIN ANALYZE: 0.8-0.9 ms of 1.8-2.1 ms for 128 rows). What the
-- key guarded holds without it:
--   - a row is only inserted for a delivery that exists and is processing,
--     while its claim's lock is held (recordAttemptsSQL), and a delivery is
--     only ever deleted with its claim, under that same lock;
--   - deleting claims deletes their rows, in the same statement as their
--     deliveries' cascade, whichever statement deletes them.
--
-- Without a transaction, one step at a time, because ingest and the worker
-- keep writing meanwhile: a transaction that took the claim table's lock
-- for the trigger and then the deliveries' for the key would take them in
-- the other order from theirs, and deadlock with them (ingest answered 503
-- for it in TestUpgradeUnderLoad). Each step can run again: an interrupted
-- migration is finished by running it again. The trigger comes first, so
-- that no moment is left with neither the trigger nor the key.

-- Each deleted claim's rows are found through webhook_attempts_delivery_idx
-- (its prefix), one lookup per claim, and deleted by ctid: a join with the
-- transition table, which has no statistics, could be planned as a scan of
-- the whole history for every batch retention deletes.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_attempts_delete_with_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM webhook_attempts
    WHERE ctid = ANY (ARRAY(
        SELECT x.tid
        FROM gone g
        CROSS JOIN LATERAL (
            SELECT a.ctid AS tid FROM webhook_attempts a
            WHERE a.provider = g.provider AND a.event_id = g.event_id
            OFFSET 0) x));
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Takes the claim table's lock alone (SHARE ROW EXCLUSIVE, for a moment).
-- SHARE UPDATE EXCLUSIVE first: it conflicts with an autovacuum of the
-- table, not with ingest's writes, so the wait for the autovacuum to be
-- cancelled holds nobody up; the stronger lock's request, which ingest's
-- writes would queue behind, is made only once no autovacuum holds the
-- table. Postgres cancels the autovacuum only after deadlock_timeout (1 s
-- by default), so that wait is given at least a minute: the session's
-- lock_timeout, which docs/operations.md sets below a second, would end
-- every such wait in a lock timeout while an autovacuum runs. A longer
-- lock_timeout, or none (0, Postgres' default), is kept: an autovacuum to
-- prevent wraparound is not cancelled, and can hold a large table for
-- longer. The stronger lock's wait is given the session's lock_timeout back.
-- +goose StatementBegin
DO $$
DECLARE
    writers_wait text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', CASE WHEN writers_wait::interval = interval '0'
        OR writers_wait::interval > interval '1 min' THEN writers_wait ELSE '1min' END, true);
    LOCK TABLE webhook_event_claims IN SHARE UPDATE EXCLUSIVE MODE;
    PERFORM set_config('lock_timeout', writers_wait, true);
    CREATE OR REPLACE TRIGGER webhook_attempts_delete_with_claims
        AFTER DELETE ON webhook_event_claims
        REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION webhook_attempts_delete_with_claims();
END
$$;
-- +goose StatementEnd

-- Dropping the key locks the history and the deliveries it references.
-- They are locked first, the deliveries before the history, as every
-- statement that writes both takes them, so the drop waits for the
-- transactions using them and deadlocks with none. SHARE UPDATE EXCLUSIVE
-- on both comes before, as above: without it, an autovacuum of the history
-- kept the drop waiting about a second with the deliveries already locked,
-- and ingest and the worker waiting behind it (TestUpgradeUnderLoad, under
-- make test's load).
-- +goose StatementBegin
DO $$
DECLARE
    writers_wait text := current_setting('lock_timeout');
BEGIN
    PERFORM set_config('lock_timeout', CASE WHEN writers_wait::interval = interval '0'
        OR writers_wait::interval > interval '1 min' THEN writers_wait ELSE '1min' END, true);
    LOCK TABLE webhook_deliveries, webhook_attempts IN SHARE UPDATE EXCLUSIVE MODE;
    PERFORM set_config('lock_timeout', writers_wait, true);
    LOCK TABLE webhook_deliveries, webhook_attempts IN ACCESS EXCLUSIVE MODE;
    ALTER TABLE webhook_attempts DROP CONSTRAINT IF EXISTS webhook_attempts_provider_event_id_route_fkey;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    LOCK TABLE webhook_deliveries, webhook_attempts IN ACCESS EXCLUSIVE MODE;
    DELETE FROM webhook_attempts a
    WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                      WHERE d.provider = a.provider AND d.event_id = a.event_id AND d.route = a.route);
    ALTER TABLE webhook_attempts ADD FOREIGN KEY (provider, event_id, route)
        REFERENCES webhook_deliveries (provider, event_id, route) ON DELETE CASCADE;
END
$$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS webhook_attempts_delete_with_claims ON webhook_event_claims;
DROP FUNCTION IF EXISTS webhook_attempts_delete_with_claims();
