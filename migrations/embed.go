// Package migrations carries hookgate's SQL migrations inside both binaries, so
// that `ingest migrate` and `worker migrate` need nothing but DATABASE_URL.
package migrations

import "embed"

// FS holds the numbered goose migrations. Each file runs in one transaction.
//
//go:embed *.sql
var FS embed.FS
