-- +goose Up

-- The breaker counts failures in the order the answers came in, not the
-- order their writes commit (times are the database's clock, less the
-- answer's age when its write was sent, so replicas' clocks do not matter).
-- failed_at holds the answer times of the failures a closed circuit
-- counts (failures is its length): a delivered answer drops exactly those
-- older than itself. last_delivered_at is the newest delivered answer the
-- row heard of: a failure answered before it does not count, however late
-- its write lands. last_failed_at is the newest failure answered, counted
-- or not: while it is recent, delivered answers write their time even
-- when nothing is counted, so that a failure still on its way finds it;
-- on a healthy route a delivered answer writes nothing.
ALTER TABLE route_breakers
    ADD COLUMN IF NOT EXISTS failed_at         timestamptz[] NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS last_delivered_at timestamptz,
    ADD COLUMN IF NOT EXISTS last_failed_at    timestamptz;

-- A closed circuit's failures counted before this migration: at its since.
UPDATE route_breakers SET failed_at = array_fill(since, ARRAY[failures]), last_failed_at = since
WHERE state = 'closed' AND failures > 0;

-- +goose Down
ALTER TABLE route_breakers
    DROP COLUMN IF EXISTS last_failed_at,
    DROP COLUMN IF EXISTS last_delivered_at,
    DROP COLUMN IF EXISTS failed_at;
