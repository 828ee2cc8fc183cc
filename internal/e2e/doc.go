// Package e2e holds process-level tests: the real ingest and worker
// binaries, run against a real Postgres, deliver signed events to a test
// downstream that deduplicates by Idempotency-Key as a real one would.
package e2e
