-- +goose NO TRANSACTION
-- +goose Up

-- Without a transaction, so that the indexes are built CONCURRENTLY, as in
-- migration 12. Every statement is idempotent and goose records the
-- version only once all have run, so a migration interrupted halfway is
-- finished by running it again: the DO block first drops any of these
-- indexes that an interrupted CONCURRENTLY build left INVALID.

-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relname IN ('webhook_event_claims_type_pattern_idx',
            'webhook_event_claims_event_id_pattern_idx', 'webhook_event_claims_settled_seen_idx',
            'webhook_event_claims_failed_updated_idx')
    LOOP
        EXECUTE format('DROP INDEX %I', idx);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- The claims list's type glob (event_type LIKE 'invoice.%') and event_id
-- prefix (event_id LIKE 'evt_1P%') filters. An index in the database's
-- collation serves LIKE only when that collation is C, so under any other
-- (en_US.UTF-8, C.UTF-8) a prefix that few claims match walked the
-- newest-first index, or scanned the table, to fill a page: a cost that
-- grows with the table, about 100 ms on 100,000 claims already
-- (BenchmarkClaimsList). These indexes compare bytes, so a LIKE prefix is
-- a range of them whatever the database's collation.
--
-- The type index, in text_pattern_ops, takes the place of migration 12's
-- webhook_event_claims_type_seen_idx: it serves an exact type the same way
-- (=, then first_seen_at in order), and the glob besides. The event id's
-- is in the C collation instead: it serves LIKE alone, and never the
-- equalities of (provider, event_id) that the primary key serves, whose
-- plans it would otherwise be a candidate for.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_type_pattern_idx
    ON webhook_event_claims (event_type text_pattern_ops, first_seen_at);
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_type_seen_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_event_id_pattern_idx
    ON webhook_event_claims (event_id COLLATE "C");

-- Two indexes that no plan of the list or the export chose over another,
-- dropped because most indexes on the claim table cost each claim twice:
-- an entry when ingest inserts it, and another when its status changes
-- (a status is indexed, so that update is never HOT). first_seen_idx
-- orders by first_seen_at alone, as migration 12's keyset index does with
-- its ties broken besides; provider_seen_idx lost to the walk newest first
-- with the provider tested on the keyset index's entries (BenchmarkClaimsList).
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_first_seen_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_provider_seen_idx;

-- The two status indexes become partial, holding only the claims of the
-- statuses they are asked for, so that neither ingest's insert of a
-- processing claim nor the worker's completion of it writes an entry to
-- them: processing claims are served by migration 1's processing_idx,
-- completed ones (nearly all) by walking the keyset index. The list's
-- failed and ignored claims, newest first:
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_settled_seen_idx
    ON webhook_event_claims (status, first_seen_at, provider, event_id) WHERE status IN ('failed', 'ignored');
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_status_seen_idx;
-- `claims retry --status failed` and the console's bulk retry, oldest
-- failure first (Store.FailedKeys):
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_failed_updated_idx
    ON webhook_event_claims (updated_at, provider, event_id) WHERE status = 'failed';
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_status_updated_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_status_updated_idx
    ON webhook_event_claims (status, updated_at);
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_failed_updated_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_status_seen_idx
    ON webhook_event_claims (status, first_seen_at, provider, event_id);
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_settled_seen_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_provider_seen_idx
    ON webhook_event_claims (provider, first_seen_at, event_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_first_seen_idx
    ON webhook_event_claims (first_seen_at DESC);
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_type_seen_idx
    ON webhook_event_claims (event_type, first_seen_at);
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_event_id_pattern_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_type_pattern_idx;
