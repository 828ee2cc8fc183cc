-- +goose NO TRANSACTION
-- +goose Up

-- Without a transaction, so that the trigram index is built CONCURRENTLY,
-- as in migrations 12 and 15: a plain CREATE INDEX would block ingest's
-- inserts while it reads every claim. Every statement is idempotent and
-- goose records the version only once all have run, so a migration
-- interrupted halfway is finished by running it again: the DO block first
-- drops the index if an interrupted CONCURRENTLY build left it INVALID.

-- pg_trgm ships with the PostgreSQL server packages (Debian's
-- postgresql-15 holds it). Creating it needs a role allowed to: the
-- database's owner on a self-run server, and on a managed Postgres an
-- extension on the provider's allow-list (docs/operations.md).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relname IN ('webhook_event_claims_event_id_trgm_idx')
    LOOP
        EXECUTE format('DROP INDEX %I', idx);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- The claims list's event id substring filter (event_id=*pay_0001*, a
-- LIKE '%pay_0001%'): no b-tree serves a pattern that does not start at
-- the first character, so without it such a search walks every claim
-- newest first. A GIN index of trigrams finds the claims holding each
-- three-character piece of the substring; a substring shorter than three
-- characters gets no help from it (the console says so). Costs an index
-- entry per trigram of each new event id (a few dozen), written at ingest.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_event_id_trgm_idx
    ON webhook_event_claims USING gin (event_id gin_trgm_ops);

-- Each attempt in full, for operators: what was sent ({method, url,
-- headers}, with secret header values redacted by the worker) and the
-- answer's headers, each bounded to 8 KiB of headers by the worker.
-- Cleared with the response by payload retention. run_attempt and
-- run_max are the attempt's place in the run of attempts it belongs to
-- (River's attempt and max_attempts of its job: a retry starts a new
-- run), so the console can say "attempt 4, 2 of 2 in this run". All NULL
-- for rows written before this migration. Expand-only: the previous
-- release neither reads nor writes these columns.
ALTER TABLE webhook_attempts
    ADD COLUMN IF NOT EXISTS request jsonb,
    ADD COLUMN IF NOT EXISTS response_headers jsonb,
    ADD COLUMN IF NOT EXISTS run_attempt integer,
    ADD COLUMN IF NOT EXISTS run_max integer;

-- Where an audited action came from: console, api or cli ('' for rows
-- written before this migration, and for actors of hookgate's own).
ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS origin text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_log DROP COLUMN IF EXISTS origin;
ALTER TABLE webhook_attempts
    DROP COLUMN IF EXISTS run_max,
    DROP COLUMN IF EXISTS run_attempt,
    DROP COLUMN IF EXISTS response_headers,
    DROP COLUMN IF EXISTS request;
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_event_id_trgm_idx;
