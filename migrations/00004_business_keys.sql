-- +goose Up

-- A delivery may now be skipped: its route's business key is held by
-- another claim, so it gets no job and no downstream call.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('processing', 'completed', 'failed', 'skipped'));

-- True for a delivery failed at ingest because its route's business key
-- could not be computed (a field was missing). It is never reopened: it
-- would run without the key that guards its effect.
ALTER TABLE webhook_deliveries
    ADD COLUMN business_key_missing boolean NOT NULL DEFAULT false;

-- One row per (route, business key) ever claimed: the primary key is the
-- business-key dedupe, as the claims' primary key is the delivery-key one.
-- The first claim to insert a key holds it; later claims with the same key
-- for the route get a skipped delivery.
CREATE TABLE webhook_business_keys (
    route        text        NOT NULL,
    -- SHA-256 of business_key: index entries stay 32 bytes however long the
    -- values taken from the event are (a btree entry over ~2.7 kB fails).
    key_hash     bytea       NOT NULL,
    -- The key as a JSON array of the route's listed values, for operators.
    business_key text        NOT NULL,
    -- The claim holding the key.
    provider     text        NOT NULL,
    event_id     text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (route, key_hash),
    -- A key lives exactly as long as the claim that holds it: deleting the
    -- claim (retention) frees the key, and a later event with it is new.
    FOREIGN KEY (provider, event_id)
        REFERENCES webhook_event_claims (provider, event_id) ON DELETE CASCADE,
    CONSTRAINT webhook_business_keys_key_hash_check CHECK (length(key_hash) = 32)
);

-- Serves the cascade when a claim is deleted, and `claims show`'s lookup of
-- the keys a claim holds; without it every claim deleted scans the table.
CREATE INDEX webhook_business_keys_claim_idx ON webhook_business_keys (provider, event_id);

-- +goose Down
DROP TABLE webhook_business_keys;
ALTER TABLE webhook_deliveries DROP COLUMN business_key_missing;
DELETE FROM webhook_deliveries WHERE status = 'skipped';
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
    CHECK (status IN ('processing', 'completed', 'failed'));
