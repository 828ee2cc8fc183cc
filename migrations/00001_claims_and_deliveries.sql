-- +goose Up

-- One row per delivery key (provider, event_id): the primary key is the
-- dedupe. Whoever inserts the row owns the event; everyone else is a duplicate.
CREATE TABLE webhook_event_claims (
    provider      text        NOT NULL,
    event_id      text        NOT NULL,
    event_type    text        NOT NULL,
    -- The provider object the event is about (e.g. Stripe's data.object.id), for operators.
    object_id     text,
    status        text        NOT NULL,
    -- The raw body, byte for byte as the provider sent it, and its content type:
    -- the worker forwards exactly these. Retention clears payload sooner than it
    -- deletes the row, so it is nullable.
    payload       bytea,
    content_type  text        NOT NULL DEFAULT '',
    -- Downstream attempts for this claim, all deliveries together, across
    -- retries and reopens.
    attempt_count integer     NOT NULL DEFAULT 0,
    last_error    text,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz,
    PRIMARY KEY (provider, event_id),
    CONSTRAINT webhook_event_claims_status_check
        CHECK (status IN ('processing', 'completed', 'failed', 'ignored')),
    CONSTRAINT webhook_event_claims_event_id_check
        CHECK (length(event_id) BETWEEN 1 AND 255),
    CONSTRAINT webhook_event_claims_attempt_count_check CHECK (attempt_count >= 0),
    CONSTRAINT webhook_event_claims_completed_at_check
        CHECK ((status = 'completed') = (completed_at IS NOT NULL))
);

-- Serves "claims currently processing" and "oldest processing claim" for
-- metrics and the reconciler without scanning terminal rows, which are most.
CREATE INDEX webhook_event_claims_processing_idx
    ON webhook_event_claims (first_seen_at) WHERE status = 'processing';

-- Serves retention (terminal claims by age) and `claims list --status`.
CREATE INDEX webhook_event_claims_status_updated_idx
    ON webhook_event_claims (status, updated_at);

-- Serves `claims list` newest first without a status filter.
CREATE INDEX webhook_event_claims_first_seen_idx
    ON webhook_event_claims (first_seen_at DESC);

-- One row per (claim, matching route): each is attempted, retried and failed
-- on its own, with its own Idempotency-Key downstream.
CREATE TABLE webhook_deliveries (
    provider      text        NOT NULL,
    event_id      text        NOT NULL,
    route         text        NOT NULL,
    status        text        NOT NULL,
    attempt_count integer     NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz,
    PRIMARY KEY (provider, event_id, route),
    -- Retention deletes a claim with its deliveries.
    FOREIGN KEY (provider, event_id)
        REFERENCES webhook_event_claims (provider, event_id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_status_check
        CHECK (status IN ('processing', 'completed', 'failed')),
    CONSTRAINT webhook_deliveries_attempt_count_check CHECK (attempt_count >= 0),
    CONSTRAINT webhook_deliveries_completed_at_check
        CHECK ((status = 'completed') = (completed_at IS NOT NULL))
);

-- Serves the reconciler: deliveries still processing, oldest first.
CREATE INDEX webhook_deliveries_processing_idx
    ON webhook_deliveries (updated_at) WHERE status = 'processing';

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_event_claims;
