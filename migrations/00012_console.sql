-- +goose NO TRANSACTION
-- +goose Up

-- Without a transaction, so that the claim table's new indexes are built
-- CONCURRENTLY: a plain CREATE INDEX would block ingest's inserts for as
-- long as it reads every claim. Every statement is idempotent and goose
-- records the version only once all have run, so a migration interrupted
-- halfway is finished by running it again: the DO block first drops any of
-- these indexes that an interrupted CONCURRENTLY build left INVALID.

-- One row per signed-in console session. The cookie carries a random
-- token; only its SHA-256 is stored, so a read of this table signs no one
-- in. Every worker replica reads the same rows, and sign-out deletes the
-- row, which ends the session on all of them. The role is not stored: it
-- is read from the configuration on every request, so a user removed from
-- it is signed out.
CREATE TABLE IF NOT EXISTS console_sessions (
    token_hash bytea       PRIMARY KEY,
    actor      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- Serves the removal of expired sessions.
CREATE INDEX IF NOT EXISTS console_sessions_expires_idx ON console_sessions (expires_at);

-- Every operator action, from the API, the console or the CLI: who did
-- what to which target. Not tied to the claims by a foreign key, so that
-- it outlives them.
CREATE TABLE IF NOT EXISTS audit_log (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    actor  text        NOT NULL,
    action text        NOT NULL,
    target text        NOT NULL DEFAULT '',
    detail jsonb       NOT NULL DEFAULT '{}'
);

-- Serves the audit listing, newest first, by keyset on (at, id).
CREATE INDEX IF NOT EXISTS audit_log_at_idx ON audit_log (at, id);

-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relname IN ('webhook_event_claims_keyset_idx',
            'webhook_event_claims_status_seen_idx', 'webhook_event_claims_provider_seen_idx',
            'webhook_event_claims_type_seen_idx', 'webhook_business_keys_hash_idx')
    LOOP
        EXECUTE format('DROP INDEX %I', idx);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- The operator API lists claims newest first by keyset on (first_seen_at,
-- provider, event_id). These serve that order alone and under its exact
-- filters (status, provider, type) and
-- under since and before, so that no filter scans the table.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_keyset_idx
    ON webhook_event_claims (first_seen_at, provider, event_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_status_seen_idx
    ON webhook_event_claims (status, first_seen_at, provider, event_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_provider_seen_idx
    ON webhook_event_claims (provider, first_seen_at, event_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_event_claims_type_seen_idx
    ON webhook_event_claims (event_type, first_seen_at);

-- Serves the business_key filter: the claims holding a key, by its hash,
-- whatever route holds it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_business_keys_hash_idx
    ON webhook_business_keys (key_hash);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_business_keys_hash_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_type_seen_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_provider_seen_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_status_seen_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_event_claims_keyset_idx;
DROP TABLE IF EXISTS audit_log;
DROP TABLE IF EXISTS console_sessions;
