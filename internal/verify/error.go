package verify

import "errors"

// The two kinds of failure, which ingest maps to statuses: 401 for
// ErrUnauthorized, 400 for ErrInvalid. Every error Verify returns wraps one
// of them, so errors.Is is enough to choose a status.
var (
	// ErrUnauthorized means the request is not proven to come from the
	// provider: the signature is missing, malformed or wrong, or its
	// timestamp is outside the tolerance.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInvalid means the signature is good but the event cannot be
	// claimed: its id or type is missing or malformed, or the body could not
	// be parsed where the scheme reads fields from it. Retrying the same
	// bytes will fail the same way.
	ErrInvalid = errors.New("invalid event")
)

// Reasons, small and fixed so they can label a metric.
const (
	reasonMissingSignature   = "missing_signature"
	reasonMalformedSignature = "malformed_signature"
	reasonBadSignature       = "bad_signature"
	reasonMissingTimestamp   = "missing_timestamp"
	reasonMalformedTimestamp = "malformed_timestamp"
	reasonTimestampTolerance = "timestamp_out_of_tolerance"
	reasonMissingID          = "missing_id"
	reasonMalformedID        = "malformed_id"
	reasonMissingType        = "missing_type"
	reasonMalformedType      = "malformed_type"
	reasonUnparsableBody     = "unparsable_body"
	reasonAmbiguousField     = "ambiguous_field"
	reasonMultipleItems      = "multiple_items"
	reasonMissingScope       = "missing_scope"
	reasonMalformedScope     = "malformed_scope"
)

// UnauthorizedReasons returns every Reason an ErrUnauthorized failure can
// carry, so that a counter labelled by reason can start at zero for each.
func UnauthorizedReasons() []string {
	return []string{
		reasonMissingSignature, reasonMalformedSignature, reasonBadSignature,
		reasonMissingTimestamp, reasonMalformedTimestamp, reasonTimestampTolerance,
	}
}

// Error is a verification failure. It carries a low-cardinality Reason for
// metrics and a message that is safe to return to the sender and to log: it
// never holds a secret, a computed signature, or any part of the body.
//
// Reason is one of missing_signature, malformed_signature, bad_signature,
// missing_timestamp, malformed_timestamp, timestamp_out_of_tolerance (all
// with Kind ErrUnauthorized) or missing_id, malformed_id, missing_type,
// malformed_type, unparsable_body, ambiguous_field, multiple_items,
// missing_scope, malformed_scope (all with Kind ErrInvalid).
type Error struct {
	// Kind is ErrUnauthorized or ErrInvalid.
	Kind error
	// Reason is a fixed snake_case word for metrics labels.
	Reason string
	// Msg is the human message, e.g. "signature does not match any configured secret".
	Msg string
}

// Error returns the human message.
func (e *Error) Error() string {
	if e.Msg == "" && e.Kind != nil {
		return e.Kind.Error() + ": " + e.Reason
	}
	return e.Msg
}

// Unwrap returns Kind, so errors.Is(err, ErrUnauthorized) and
// errors.Is(err, ErrInvalid) work through any wrapping.
func (e *Error) Unwrap() error { return e.Kind }

// unauthorized returns an ErrUnauthorized failure. Its result type is error,
// not *Error, so that no caller can return a typed nil.
func unauthorized(reason, msg string) error {
	return &Error{Kind: ErrUnauthorized, Reason: reason, Msg: msg}
}

// invalid returns an ErrInvalid failure.
func invalid(reason, msg string) error {
	return &Error{Kind: ErrInvalid, Reason: reason, Msg: msg}
}
