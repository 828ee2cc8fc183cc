-- +goose Up

-- When a claim last became terminal (completed, failed or ignored): the age
-- retention measures. NULL while the claim is processing, so a claim that is
-- reopened starts its retention afresh when it settles again.
ALTER TABLE webhook_event_claims ADD COLUMN terminal_at timestamptz;

-- Existing terminal claims became terminal when they were last updated
-- (status changes are the only updates of a terminal claim); completed_at is
-- that same moment for completed ones.
UPDATE webhook_event_claims SET terminal_at = coalesce(completed_at, updated_at)
WHERE status <> 'processing';

-- terminal_at is kept by the database, whatever statement changes a
-- claim's status (the roll-up, a reopen, an ignored insert): set to now()
-- when the status becomes terminal, cleared when it goes back to
-- processing, left alone when a terminal status is rewritten unchanged. An
-- INSERT may give an earlier terminal_at (imports, benchmarks).
-- +goose StatementBegin
CREATE FUNCTION webhook_event_claims_terminal_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'processing' THEN
        NEW.terminal_at := NULL;
    ELSIF TG_OP = 'INSERT' THEN
        NEW.terminal_at := coalesce(NEW.terminal_at, now());
    ELSIF OLD.status IS DISTINCT FROM NEW.status THEN
        NEW.terminal_at := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER webhook_event_claims_terminal_at
    BEFORE INSERT OR UPDATE OF status ON webhook_event_claims
    FOR EACH ROW EXECUTE FUNCTION webhook_event_claims_terminal_at();

ALTER TABLE webhook_event_claims ADD CONSTRAINT webhook_event_claims_terminal_at_check
    CHECK ((status = 'processing') = (terminal_at IS NULL));

-- Serves retention's deletes: terminal claims oldest first. Processing
-- claims (terminal_at NULL) stay out of it, so ingest's inserts never touch it.
CREATE INDEX webhook_event_claims_terminal_idx
    ON webhook_event_claims (terminal_at) WHERE terminal_at IS NOT NULL;

-- Serves retention's payload clearing: only terminal claims that still hold
-- a payload, so a claim leaves this index once cleared and each batch starts
-- at the first payload still to clear instead of skipping cleared ones.
CREATE INDEX webhook_event_claims_terminal_payload_idx
    ON webhook_event_claims (terminal_at) WHERE terminal_at IS NOT NULL AND payload IS NOT NULL;

-- +goose Down
DROP INDEX webhook_event_claims_terminal_payload_idx;
DROP INDEX webhook_event_claims_terminal_idx;
ALTER TABLE webhook_event_claims DROP CONSTRAINT webhook_event_claims_terminal_at_check;
DROP TRIGGER webhook_event_claims_terminal_at ON webhook_event_claims;
DROP FUNCTION webhook_event_claims_terminal_at();
ALTER TABLE webhook_event_claims DROP COLUMN terminal_at;
