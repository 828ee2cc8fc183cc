-- +goose NO TRANSACTION
-- +goose Up

-- Without a transaction, so that both index statements run CONCURRENTLY,
-- as in migrations 12, 15 and 19: a plain CREATE or DROP INDEX would block
-- ingest's inserts and the worker's updates of the claims while it runs.
-- Every statement is idempotent and goose records the version only once
-- all have run, so a migration interrupted halfway is finished by running
-- it again: the DO block first drops the new index if an interrupted
-- CONCURRENTLY build left it INVALID.

-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relname IN ('webhook_event_claims_event_id_substring_idx')
    LOOP
        EXECUTE format('DROP INDEX %I', idx);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- The trigram index of migration 19 was built on event_id itself, and
-- pg_trgm's operator class also answers equality (since Postgres 14). For
-- an equality whose value comes from the other side of a join
-- (c.event_id = d.event_id) the planner cannot know which trigrams it will
-- look up and costs the lookup at almost nothing; it then preferred the
-- trigram index to the primary key for the joins of the stats, the
-- overview and the claims list. With ids that share most of their
-- trigrams (ord_0000001, ord_0000002, ...) each such lookup reads a large
-- share of the index: a stats request took 53 s over 500k claims.
--
-- Built on the expression event_id || '' instead, the index serves only
-- statements that name that expression: the claims list's substring
-- filter does, from three characters on (claim/search.go); no join or
-- lookup by id does, so they keep to the primary key.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_event_id_substring_idx
    ON webhook_event_claims USING gin ((event_id || '') gin_trgm_ops);

DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_event_id_trgm_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_event_id_trgm_idx
    ON webhook_event_claims USING gin (event_id gin_trgm_ops);
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_event_id_substring_idx;
