-- +goose Up

-- An open circuit's story, for the routes page, GET /api/v1/routes and
-- `worker routes`: opened_at is when a closed circuit opened (kept while
-- it goes open, half-open and open again; cleared when it closes), and
-- last_failure the class of the last failure the breaker counted: a status
-- line ("HTTP 503 Service Unavailable") or a fixed reason ("timeout",
-- "connection refused", "malformed response"), never text the downstream
-- chose, so that viewers may read it.
ALTER TABLE route_breakers
    ADD COLUMN IF NOT EXISTS opened_at    timestamptz,
    ADD COLUMN IF NOT EXISTS last_failure text;

-- Circuits open before this migration: opened at their since, as near as known.
UPDATE route_breakers SET opened_at = since WHERE state = 'open' AND opened_at IS NULL;

-- +goose Down
ALTER TABLE route_breakers
    DROP COLUMN IF EXISTS last_failure,
    DROP COLUMN IF EXISTS opened_at;
