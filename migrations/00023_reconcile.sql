-- +goose Up

-- Where a claim came from: a webhook ingest accepted, or an event that
-- reconciliation fetched from the provider's API because it was never
-- delivered. A constant default adds the column without rewriting the
-- table; the check is NOT VALID so that adding it reads no existing row
-- (they all hold the default), while every new row is held to it.
ALTER TABLE webhook_event_claims ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT 'webhook';
ALTER TABLE webhook_event_claims DROP CONSTRAINT IF EXISTS webhook_event_claims_source_check;
ALTER TABLE webhook_event_claims ADD CONSTRAINT webhook_event_claims_source_check
    CHECK (source IN ('webhook', 'reconcile')) NOT VALID;

-- One row per reconciliation run of one provider. newest is the creation
-- time of the newest event (or delivery) the run saw, or the previous
-- run's when it saw none: the next run starts a minute before it. A run
-- still going has no finished_at; one that failed has its error, which
-- names the provider's answer and never a key.
CREATE TABLE IF NOT EXISTS reconcile_runs (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider    text        NOT NULL,
    trigger     text        NOT NULL CHECK (trigger IN ('schedule', 'cli', 'api')),
    actor       text,
    dry_run     boolean     NOT NULL DEFAULT false,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    since       timestamptz NOT NULL,
    newest      timestamptz,
    listed      integer     NOT NULL DEFAULT 0,
    claimed     integer     NOT NULL DEFAULT 0,
    redelivered integer     NOT NULL DEFAULT 0,
    skipped     integer     NOT NULL DEFAULT 0,
    error       text
);

-- The runs page and the next run's window read a provider's newest runs.
CREATE INDEX IF NOT EXISTS reconcile_runs_provider_started_idx ON reconcile_runs (provider, started_at DESC);
-- Retention deletes the oldest runs first.
CREATE INDEX IF NOT EXISTS reconcile_runs_started_idx ON reconcile_runs (started_at);

-- +goose Down
DROP TABLE IF EXISTS reconcile_runs;
ALTER TABLE webhook_event_claims DROP CONSTRAINT IF EXISTS webhook_event_claims_source_check;
ALTER TABLE webhook_event_claims DROP COLUMN IF EXISTS source;
