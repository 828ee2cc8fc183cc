package verify

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	githubSecret        = "gh-webhook-secret-3f9a7c1e5b"
	githubSecretRotated = "gh-webhook-secret-rotated-8d2e"
	githubSecretOther   = "not-the-secret"
	githubDelivery      = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
)

// githubRequest returns the headers GitHub sends for body signed with secret.
func githubRequest(body []byte, secret string, kv ...string) http.Header {
	h := headers(
		githubSignatureHeader, "sha256="+macHex(secret, string(body)),
		githubDeliveryHeader, githubDelivery,
		githubEventHeader, "push",
		"X-GitHub-Hook-ID", "292430182",
		"Content-Type", "application/json",
	)
	return with(h, kv...)
}

func TestGitHub(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "github", Secrets: [][]byte{[]byte(githubSecret), []byte(githubSecretRotated)}})
	require.NoError(t, err)

	body := readTestdata(t, "github_push.json")
	want := Event{ID: githubDelivery, Type: "push"}
	good := "sha256=" + macHex(githubSecret, string(body))
	form := []byte("payload=" + strings.ReplaceAll(string(body[:64]), `"`, "%22"))

	cases := []verifyCase{
		{name: "valid", body: body, header: githubRequest(body, githubSecret), want: want},
		{name: "rotated second secret", body: body, header: githubRequest(body, githubSecretRotated), want: want},
		{name: "uppercase hex", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, "sha256="+strings.ToUpper(macHex(githubSecret, string(body)))), want: want},
		{name: "form-encoded body", body: form, header: githubRequest(form, githubSecret), want: want},
		{name: "ping event", body: body, header: githubRequest(body, githubSecret, githubEventHeader, "ping"), want: Event{ID: githubDelivery, Type: "ping"}},

		{name: "wrong secret", body: body, header: githubRequest(body, githubSecretOther), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing header", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, ""), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "only the SHA-1 header", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, "", "X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567"), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "no sha256= prefix", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, good[len("sha256="):]), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "sha1 prefix", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, "sha1="+good[len("sha256="):]), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "not hex", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, "sha256="+strings.Repeat("g", 64)), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "truncated", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, good[:len(good)-2]), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "two signatures", body: body, header: githubRequest(body, githubSecret, githubSignatureHeader, good+","+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "re-serialized body", body: reserialized(t, body), header: githubRequest(body, githubSecret), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "one byte changed", body: flipByte(body, 10), header: githubRequest(body, githubSecret), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "empty body", body: nil, header: githubRequest(body, githubSecret), wantErr: ErrUnauthorized, reason: "bad_signature"},

		{name: "delivery missing", body: body, header: githubRequest(body, githubSecret, githubDeliveryHeader, ""), wantErr: ErrInvalid, reason: "missing_id"},
		{name: "delivery with a space", body: body, header: githubRequest(body, githubSecret, githubDeliveryHeader, "72d3162e cc78"), wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "delivery not ASCII", body: body, header: githubRequest(body, githubSecret, githubDeliveryHeader, "d\u00e9livery"), wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "event missing", body: body, header: githubRequest(body, githubSecret, githubEventHeader, ""), wantErr: ErrInvalid, reason: "missing_type"},
		{name: "unauthenticated and no delivery is unauthorized", body: body, header: githubRequest(body, githubSecretOther, githubDeliveryHeader, ""), wantErr: ErrUnauthorized, reason: "bad_signature"},
	}
	runVerifyCases(t, v, cases, githubSecret, githubSecretRotated)
}

// TestGitHubDocumentedExample checks the worked example in GitHub's
// "Validating webhook deliveries" documentation, so the test's own HMAC
// helper is not the only witness.
func TestGitHubDocumentedExample(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "github", Secrets: [][]byte{[]byte("It's a Secret to Everybody")}})
	require.NoError(t, err)
	h := headers(
		githubSignatureHeader, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		githubDeliveryHeader, githubDelivery,
		githubEventHeader, "ping",
	)
	got, err := v.Verify([]byte("Hello, World!"), h, testNow())
	require.NoError(t, err)
	require.Equal(t, Event{ID: githubDelivery, Type: "ping"}, got)
}
