-- +goose Up

-- One circuit breaker per route, shared by every worker replica. A route
-- without a row is closed with no failures counted: the row is made at the
-- first attempt that does not deliver. cool_down_ms is the wait before the
-- next probe (doubled by each failed probe, up to the route's
-- max_cool_down); probe_until is the lease of the probe a half-open
-- circuit granted, so that a worker killed while probing strands nothing:
-- once it passes, another delivery may take the probe.
CREATE TABLE IF NOT EXISTS route_breakers (
    route         text        PRIMARY KEY,
    state         text        NOT NULL DEFAULT 'closed'
                              CHECK (state IN ('closed', 'open', 'half_open')),
    since         timestamptz NOT NULL DEFAULT now(),
    failures      integer     NOT NULL DEFAULT 0,
    cool_down_ms  bigint      NOT NULL DEFAULT 0,
    next_probe_at timestamptz,
    probe_until   timestamptz
);

-- +goose Down
DROP TABLE IF EXISTS route_breakers;
