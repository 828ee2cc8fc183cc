-- +goose NO TRANSACTION
-- +goose Up

-- Without a transaction, so that the index is built CONCURRENTLY, as in
-- migrations 12, 15, 19 and 21: a plain CREATE INDEX would block the claim
-- statement's inserts and the worker's updates of the deliveries while it
-- runs. Every statement is idempotent and goose records the version only
-- once all have run, so a migration interrupted halfway is finished by
-- running it again: the DO block first drops the index if an interrupted
-- CONCURRENTLY build left it INVALID.

-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relname IN ('webhook_deliveries_created_brin_idx')
    LOOP
        EXECUTE format('DROP INDEX %I', idx);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- The stats and the overview's activity count the deliveries made in a
-- window by their own created_at (claim/stats.go, stats_activity.go),
-- instead of joining the claims first seen in it to their deliveries: over
-- a day of 1,000,000 claims that join took seconds. The claim statement
-- makes a claim and all its deliveries (chained ones as waiting) in one
-- statement, so a delivery's created_at is its claim's first_seen_at and
-- the counts are the same.
--
-- BRIN, not a btree: rows are inserted in created_at order, so a summary
-- of each range of pages (its least and greatest created_at) finds a
-- window's pages, in an index of some tens of kilobytes per million
-- deliveries. Its upkeep costs next to nothing on the hot path: a new row
-- goes into a range not summarized yet (vacuum, which migration 20 has run
-- after every 1 % of inserts, summarizes it), and an update's new version
-- at most widens its range's summary, where a btree would take an entry
-- for the insert and for every one of the worker's updates (they are not
-- HOT: the status is in partial indexes). Measured with pg_walinspect over
-- 100,000 deliveries inserted, then completed: 1.6 bytes of WAL a delivery
-- for this index and none for the completions, against 66 and 77 bytes
-- for a btree, beside some 620 bytes for the table and its other indexes
-- (docs/benchmarks-history.md). Ranges whose old rows retention
-- deleted and whose space new rows reuse keep their oldest bound, but the
-- windows read end now, so only the greatest bound decides which ranges
-- they read. A range is 32 pages (256 kB, some 2,000 deliveries), not the
-- default 128: the activity reads each of its intervals on its own, and
-- reads whole ranges, so a smaller one reads fewer rows of the intervals
-- beside it (a twentieth more over a day of 1,000,000 deliveries, against
-- a fifth).
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_created_brin_idx
    ON webhook_deliveries USING brin (created_at) WITH (pages_per_range = 32);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_created_brin_idx;
