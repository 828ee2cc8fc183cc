-- +goose Up

-- The replay guard: SHA-256 of the raw body, set only for providers whose
-- signature does not cover the event id (replay_guard: body). NULL otherwise.
ALTER TABLE webhook_event_claims ADD COLUMN body_hash bytea;

-- One claim per (provider, body) among guarded claims: a captured request
-- re-sent under a new id conflicts here, in the same INSERT ... ON CONFLICT
-- DO NOTHING that the primary key arbitrates, so the guard is decided
-- atomically with the claim and never by a lookup then insert. Partial, so
-- unguarded providers (and claims made before the guard) cost nothing; the
-- key lives on the claim row, so it is deleted with the claim by retention.
CREATE UNIQUE INDEX webhook_event_claims_body_hash_key
    ON webhook_event_claims (provider, body_hash) WHERE body_hash IS NOT NULL;

-- The provider's Content-Encoding (other than identity), forwarded as
-- received: the signed bytes are the encoded ones.
ALTER TABLE webhook_event_claims ADD COLUMN content_encoding text NOT NULL DEFAULT '';

-- Hookgate-Attempt numbers used by the delivery's earlier jobs: a job's
-- attempt n is sent as attempt_base + n. River's own attempt counter is
-- durable when a job is fetched, so a crashed attempt still moves the
-- number on; attempt_base moves when a job ends (its numbers are spent, a
-- reopen's new job starts after them) or when River hands an attempt back
-- (a shutdown interrupt), in transactions that already commit anyway.
ALTER TABLE webhook_deliveries ADD COLUMN attempt_base integer NOT NULL DEFAULT 0
    CONSTRAINT webhook_deliveries_attempt_base_check CHECK (attempt_base >= 0);

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN attempt_base;
ALTER TABLE webhook_event_claims DROP COLUMN content_encoding;
DROP INDEX webhook_event_claims_body_hash_key;
ALTER TABLE webhook_event_claims DROP COLUMN body_hash;
