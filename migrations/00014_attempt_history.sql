-- +goose Up

-- One row per downstream attempt of a delivery: the Hookgate-Attempt
-- number sent, when it went out and how long it took, the status of the
-- answer (NULL when none came), why it did not count as delivered (NULL on
-- success) and the first 2 KiB of the answer's body, redacted by the
-- worker. Written in the transaction that records the attempt's outcome,
-- deleted with its delivery (and so with its claim); retention clears the
-- response when it clears the claim's payload. Expand-only: a new table,
-- which the previous release neither reads nor writes.
CREATE TABLE IF NOT EXISTS webhook_attempts (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    route       text        NOT NULL,
    attempt     integer     NOT NULL,
    started_at  timestamptz NOT NULL,
    duration_ms integer     NOT NULL,
    status_code integer,
    error       text,
    response    text,
    FOREIGN KEY (provider, event_id, route)
        REFERENCES webhook_deliveries (provider, event_id, route) ON DELETE CASCADE
);

-- Serves a delivery's timeline and the cascade from its delivery. Not
-- unique: a run whose outcome was written but whose job River ran again
-- (its commit lost with the connection) may send one number twice.
CREATE INDEX IF NOT EXISTS webhook_attempts_delivery_idx
    ON webhook_attempts (provider, event_id, route, attempt);

-- +goose Down
DROP TABLE webhook_attempts;
