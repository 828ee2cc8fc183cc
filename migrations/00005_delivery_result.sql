-- +goose Up

-- What a route's result program took from the downstream's answer to the
-- attempt that completed the delivery (e.g. the id of the record it
-- created), as JSON of at most 1 KiB (the worker bounds it). Written in the
-- transaction that completes the delivery and cleared whenever the delivery
-- leaves completed, like completed_at; NULL when the route records none.
ALTER TABLE webhook_deliveries ADD COLUMN result jsonb;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN result;
