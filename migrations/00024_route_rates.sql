-- +goose Up

-- One token bucket per paced route (routes[].rate), shared by every worker
-- replica, beside route_breakers. tokens is what the bucket held at
-- refilled_at; the bucket refills at limit/per up to burst + 1 tokens, which
-- the workers pass with each take (the settings live in the config file, so
-- a changed rate takes effect at the next take). A worker takes a few
-- tokens in one conditional statement under the row's lock (claim's
-- RateTake) and spends them at once. held_until is a downstream's
-- Retry-After: nothing is sent to the route before it, on any replica. A
-- route without a rate gets a row only when it is held.
CREATE TABLE IF NOT EXISTS route_rates (
    route       text             PRIMARY KEY,
    tokens      double precision NOT NULL DEFAULT 0,
    refilled_at timestamptz      NOT NULL DEFAULT now(),
    held_until  timestamptz
);

-- +goose Down
DROP TABLE IF EXISTS route_rates;
