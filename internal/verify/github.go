package verify

import (
	"net/http"
	"strings"
	"time"
)

// GitHub's delivery headers.
const (
	githubSignatureHeader = "X-Hub-Signature-256"
	githubDeliveryHeader  = "X-GitHub-Delivery"
	githubEventHeader     = "X-GitHub-Event"
)

// githubVerifier verifies GitHub webhooks: "sha256=" + hex HMAC-SHA256 of the
// body. GitHub signs neither a timestamp nor the id, so a captured request
// re-sent under a new X-GitHub-Delivery verifies; ingest's replay guard
// (replay_guard: body) is the defence. The id and type come from headers and the
// body is never parsed, which also admits GitHub's form-encoded deliveries.
// ObjectID is left empty: GitHub events have no one object in common (a push
// names a repository and commits, an issue event an issue), and hook_id names
// the webhook, not what happened.
type githubVerifier struct {
	secrets [][]byte
}

// Verify implements Verifier.
func (v *githubVerifier) Verify(body []byte, h http.Header, _ time.Time) (Event, error) {
	header := h.Get(githubSignatureHeader)
	if header == "" {
		return Event{}, unauthorized(reasonMissingSignature, "missing "+githubSignatureHeader+" header")
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return Event{}, unauthorized(reasonMalformedSignature, githubSignatureHeader+` header does not start with "sha256="`)
	}
	sig, ok := decodeHexMAC(hexSig)
	if !ok {
		return Event{}, unauthorized(reasonMalformedSignature, githubSignatureHeader+" header is not a hex SHA-256 HMAC")
	}
	if !matchAny(v.secrets, [][]byte{sig}, body) {
		return Event{}, unauthorized(reasonBadSignature, "signature does not match any configured secret")
	}
	return normalize(fromHeader(h, githubDeliveryHeader), fromHeader(h, githubEventHeader), value{})
}
