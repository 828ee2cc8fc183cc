package batch

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Refused reports whether err is the database refusing a statement (a
// malformed value, a constraint, a deadlock), as opposed to not answering it
// (a lost connection, a timeout, a server shutting down or out of
// resources). A batch the database refused may owe it to one of its calls,
// so splitting it finds the culprit; a batch that got no answer is not run
// again, since each retry would wait as long to hear the same.
func Refused(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || len(pg.Code) < 2 {
		return false
	}
	switch pg.Code[:2] {
	case "08", // connection exception
		"53", // insufficient resources
		"57", // operator intervention: shutdown, query canceled
		"58", // system error
		"XX": // internal error
		return false
	}
	return true
}
