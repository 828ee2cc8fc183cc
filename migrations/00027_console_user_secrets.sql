-- +goose Up

-- What the console knows of each user's password across restarts: a
-- random salt and PBKDF2-HMAC-SHA-256 of the password's SHA-256 digest
-- under it, never the password or its bare digest. A worker that starts
-- (or reads a password_file again) with a password whose verifier differs
-- ends the user's sessions started before then and stores the new one, so
-- a password that goes A → B → A across restarts brings back no session of
-- A's first time. A user with no row yet (the first start after this
-- migration) has their sessions ended once.
CREATE TABLE IF NOT EXISTS console_user_secrets (
    actor      text        PRIMARY KEY,
    salt       bytea       NOT NULL,
    verifier   bytea       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS console_user_secrets;
