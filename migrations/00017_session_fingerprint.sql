-- +goose Up

-- Each console session carries a fingerprint of the credential it signed
-- in with: HMAC-SHA-256 keyed by the SHA-256 of the user's password, over
-- the session's token. Every request recomputes it from the password as
-- the worker has it now (a restart's new environment, a password_file read
-- again), so a changed password ends the user's sessions on every replica.
-- Without the token, which only the cookie holds, the column tells nothing
-- about the password. Sessions from before this column have none and are
-- ended at their next request: their users sign in again once.
ALTER TABLE console_sessions ADD COLUMN IF NOT EXISTS fingerprint bytea;

-- Serves ending all of one user's sessions.
CREATE INDEX IF NOT EXISTS console_sessions_actor_idx ON console_sessions (actor);

-- +goose Down
DROP INDEX IF EXISTS console_sessions_actor_idx;
ALTER TABLE console_sessions DROP COLUMN IF EXISTS fingerprint;
