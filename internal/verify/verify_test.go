package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testUnix is the clock the tests run at: 2024-07-16T18:03:32Z.
const testUnix = 1721153012

// testNow returns the tests' fixed clock.
func testNow() time.Time { return time.Unix(testUnix, 0) }

// readTestdata returns a sample payload byte for byte.
func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(tb, err)
	return b
}

// headers builds an http.Header from name/value pairs, canonicalizing names
// the way net/http does for a real request.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// with returns a copy of h with the given name/value pairs set; an empty
// value removes the header.
func with(h http.Header, kv ...string) http.Header {
	h = h.Clone()
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			h.Del(kv[i])
			continue
		}
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// macHex and macBase64 compute HMAC-SHA256 for the schemes that have no
// reference library (GitHub, Shopify, generic hmac).
func macHex(secret string, parts ...string) string {
	return hex.EncodeToString(testMAC(secret, parts...))
}

func macBase64(secret string, parts ...string) string {
	return base64.StdEncoding.EncodeToString(testMAC(secret, parts...))
}

func testMAC(secret string, parts ...string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// reserialized returns body decoded and encoded again by encoding/json: the
// same data, different bytes (sorted keys, no whitespace, raw UTF-8), which
// is what a proxy or framework that parses before verifying would hand over.
func reserialized(tb testing.TB, body []byte) []byte {
	tb.Helper()
	var v any
	require.NoError(tb, json.Unmarshal(body, &v))
	out, err := json.Marshal(v)
	require.NoError(tb, err)
	require.NotEqual(tb, body, out, "re-serializing must change the bytes for the test to mean anything")
	return out
}

// flipByte returns a copy of body with one byte changed.
func flipByte(body []byte, i int) []byte {
	out := append([]byte(nil), body...)
	out[i] ^= 0x01
	return out
}

// verifyCase is one row of a scheme's table: a request and what Verify must
// make of it.
type verifyCase struct {
	name   string
	body   []byte
	header http.Header
	now    time.Time // zero means testNow()

	want    Event
	wantErr error  // ErrUnauthorized, ErrInvalid or nil
	reason  string // Error.Reason when wantErr is set
}

// runVerifyCases runs each case against v. secrets are strings an error
// message must never contain (with the computed signatures, which are
// checked by never echoing header values at all).
func runVerifyCases(t *testing.T, v Verifier, cases []verifyCase, secrets ...string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := tc.now
			if now.IsZero() {
				now = testNow()
			}
			got, err := v.Verify(tc.body, tc.header, now)
			if tc.wantErr == nil {
				require.NoError(t, err)
				if got.Body != nil {
					// The body as parsed is handed on, for routes.
					want, perr := parseObject(tc.body)
					require.NoError(t, perr)
					require.Equal(t, want, got.Body)
					got.Body = nil
				}
				require.Equal(t, tc.want, got)
				return
			}
			requireVerifyError(t, err, tc.wantErr, tc.reason)
			require.Zero(t, got, "a failed verification must not yield an event")
			requireSafeMessage(t, err, tc.body, tc.header, secrets...)
		})
	}
}

// requireVerifyError asserts err is an *Error of the given kind and reason.
func requireVerifyError(tb testing.TB, err, kind error, reason string) {
	tb.Helper()
	require.Error(tb, err)
	require.ErrorIs(tb, err, kind)
	var ve *Error
	require.ErrorAs(tb, err, &ve)
	require.Equal(tb, reason, ve.Reason, "message: %s", ve.Msg)
	other := ErrInvalid
	if kind == ErrInvalid {
		other = ErrUnauthorized
	}
	require.NotErrorIs(tb, err, other)
}

// requireSafeMessage asserts the message holds no secret, no signature
// header value, and no run of the body long enough to matter.
func requireSafeMessage(tb testing.TB, err error, body []byte, h http.Header, secrets ...string) {
	tb.Helper()
	msg := err.Error()
	require.NotEmpty(tb, msg)
	for _, s := range secrets {
		require.NotContains(tb, msg, s)
	}
	for _, name := range []string{stripeSignatureHeader, githubSignatureHeader, shopifySignatureHeader, swSignatureHeader} {
		if v := h.Get(name); len(v) >= 8 {
			require.NotContains(tb, msg, v)
		}
	}
	if len(body) >= 16 {
		require.NotContains(tb, msg, string(body[:16]))
	}
}

func TestNew(t *testing.T) {
	t.Parallel()

	secrets := [][]byte{[]byte("whsec_c2VjcmV0LWtleS1ieXRlcw==")}
	tests := []struct {
		name    string
		config  Config
		wantErr string // substring; empty means success
	}{
		{name: "stripe", config: Config{Scheme: "stripe", Secrets: secrets}},
		{name: "github", config: Config{Scheme: "github", Secrets: secrets}},
		{name: "shopify", config: Config{Scheme: "shopify", Secrets: secrets}},
		{name: "standard-webhooks", config: Config{Scheme: "standard-webhooks", Secrets: secrets}},
		{name: "standard-webhooks bare base64", config: Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte("c2VjcmV0LWtleS1ieXRlcw==")}}},
		{name: "hmac minimal", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Encoding: "hex", IDFrom: "header:X-Id"}},
		{name: "hmac full", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Prefix: "sha256=", Encoding: "base64", IDFrom: "json:data.id", TypeFrom: "header:X-Type", TimestampHeader: "X-Ts", Tolerance: time.Minute}},

		{name: "unknown scheme", config: Config{Scheme: "paypall", Secrets: secrets}, wantErr: `unknown scheme "paypall"`},
		{name: "empty scheme", config: Config{Secrets: secrets}, wantErr: "scheme is required"},
		{name: "no secrets", config: Config{Scheme: "stripe"}, wantErr: "no secrets"},
		{name: "empty secret", config: Config{Scheme: "github", Secrets: [][]byte{[]byte("a"), nil}}, wantErr: "secret 2 of 2 is empty"},
		{name: "negative tolerance", config: Config{Scheme: "stripe", Secrets: secrets, Tolerance: -time.Second}, wantErr: "negative"},
		{name: "standard-webhooks secret not base64", config: Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte("whsec_not*base64!")}}, wantErr: "secret 1 of 1 is not whsec_ followed by base64"},
		{name: "standard-webhooks secret empty key", config: Config{Scheme: "standard-webhooks", Secrets: [][]byte{[]byte("whsec_")}}, wantErr: "is not whsec_ followed by base64"},
		{name: "hmac setting on stripe", config: Config{Scheme: "stripe", Secrets: secrets, Header: "X-Sig"}, wantErr: `header applies only to scheme hmac, ed25519, ecdsa, not "stripe"`},
		{name: "hmac setting on github", config: Config{Scheme: "github", Secrets: secrets, TimestampHeader: "X-Ts"}, wantErr: "timestamp_header applies only to scheme hmac"},
		{name: "hmac without header", config: Config{Scheme: "hmac", Secrets: secrets, Encoding: "hex", IDFrom: "header:X-Id"}, wantErr: "header is required"},
		{name: "hmac bad encoding", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Encoding: "base32", IDFrom: "header:X-Id"}, wantErr: `encoding "base32" must be hex or base64`},
		{name: "hmac without id_from", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Encoding: "hex"}, wantErr: "id_from is required"},
		{name: "hmac id_from unknown kind", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Encoding: "hex", IDFrom: "query:id"}, wantErr: `id_from "query:id" must be`},
		{name: "hmac id_from empty path", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Encoding: "hex", IDFrom: "json:"}, wantErr: "id_from"},
		{name: "hmac id_from empty segment", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Encoding: "hex", IDFrom: "json:data..id"}, wantErr: "id_from"},
		{name: "hmac type_from bad", config: Config{Scheme: "hmac", Secrets: secrets, Header: "X-Sig", Encoding: "hex", IDFrom: "header:X-Id", TypeFrom: "header"}, wantErr: `type_from "header" must be`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := New(tc.config)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, v)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.Nil(t, v)
			for _, s := range tc.config.Secrets {
				if len(s) > len("whsec_") {
					require.NotContains(t, err.Error(), string(s))
				}
			}
		})
	}
}

func TestNewCopiesSecrets(t *testing.T) {
	t.Parallel()

	secret := []byte("It's a Secret to Everybody")
	v, err := New(Config{Scheme: "github", Secrets: [][]byte{secret}})
	require.NoError(t, err)
	copy(secret, "XXXX")

	h := headers(
		githubSignatureHeader, "sha256="+macHex("It's a Secret to Everybody", "Hello, World!"),
		githubDeliveryHeader, "d1", githubEventHeader, "ping",
	)
	_, err = v.Verify([]byte("Hello, World!"), h, testNow())
	require.NoError(t, err)
}

func TestValidID(t *testing.T) {
	t.Parallel()

	tests := []struct {
		id   string
		want bool
	}{
		{"evt_1PdU2vLkdIwHu7ixQ3aV9nRm", true},
		{"72d3162e-cc78-11e3-81ab-4c9367dc0958", true},
		{"a", true},
		{"!~", true},
		{strings.Repeat("x", 255), true},
		{"", false},
		{strings.Repeat("x", 256), false},
		{"has space", false},
		{"tab\there", false},
		{"line\nbreak", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"caf\u00e9", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%.20q", tc.id), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ValidID(tc.id))
		})
	}
}

func TestError(t *testing.T) {
	t.Parallel()

	err := unauthorized(reasonBadSignature, "signature does not match any configured secret")
	wrapped := fmt.Errorf("verifying stripe delivery: %w", err)

	require.ErrorIs(t, wrapped, ErrUnauthorized)
	require.NotErrorIs(t, wrapped, ErrInvalid)
	var ve *Error
	require.ErrorAs(t, wrapped, &ve)
	require.Equal(t, "bad_signature", ve.Reason)
	require.Equal(t, "signature does not match any configured secret", err.Error())

	require.ErrorIs(t, invalid(reasonMissingID, "event id is missing"), ErrInvalid)
	require.Equal(t, "invalid event: missing_id", (&Error{Kind: ErrInvalid, Reason: "missing_id"}).Error())
}

func TestSplitBounded(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{"a,,b", []string{"a", "", "b"}},
		{"a,b,", []string{"a", "b", ""}},
		{"1,2,3,4,5", []string{"1", "2", "3"}},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, splitBounded(tc.in, ",", 3), "input %q", tc.in)
	}
}

// TestConcurrentVerify runs one verifier of each scheme from many goroutines
// at once, each checking what it verified; with -race it proves Verify
// shares no mutable state.
func TestConcurrentVerify(t *testing.T) {
	t.Parallel()

	now := testNow()
	type sample struct {
		v      Verifier
		body   []byte
		header http.Header
		id     string
	}
	verifier := func(c Config) Verifier {
		v, err := New(c)
		require.NoError(t, err, c.Scheme)
		return v
	}
	stripeBody := readTestdata(t, "stripe_checkout_session_completed.json")
	githubBody := readTestdata(t, "github_push.json")
	shopifyBody := readTestdata(t, "shopify_orders_create.json")
	swBody := readTestdata(t, "standardwebhooks_invoice_paid.json")
	hmacBody := []byte(`{"event":{"name":"shipment.created"}}`)
	samples := map[string]sample{
		schemeStripe: {verifier(Config{Scheme: schemeStripe, Secrets: [][]byte{[]byte(stripeSecret)}}),
			stripeBody, stripeRequest(stripeBody, stripeSecret, now.Add(-time.Second)), "evt_1PdU2vLkdIwHu7ixQ3aV9nRm"},
		schemeGitHub: {verifier(Config{Scheme: schemeGitHub, Secrets: [][]byte{[]byte("old"), []byte(githubSecret)}}),
			githubBody, githubRequest(githubBody, githubSecret), githubDelivery},
		schemeShopify: {verifier(Config{Scheme: schemeShopify, Secrets: [][]byte{[]byte(shopifySecret)}}),
			shopifyBody, shopifyRequest(shopifyBody, shopifySecret), shopifyEventID},
		schemeStandardWebhooks: {verifier(Config{Scheme: schemeStandardWebhooks, Secrets: [][]byte{[]byte(swSecret)}}),
			swBody, swRequest(t, swSecret, swMsgID, now.Add(-time.Second), swBody), swMsgID},
		schemeHMAC: {verifier(Config{Scheme: schemeHMAC, Secrets: [][]byte{[]byte(acmeSecret)}, Header: "X-Acme-Signature",
			Prefix: "sha256=", Encoding: "hex", IDFrom: "header:X-Acme-Delivery", TypeFrom: "json:event.name"}),
			hmacBody, headers("X-Acme-Signature", "sha256="+macHex(acmeSecret, string(hmacBody)), "X-Acme-Delivery", "dlv_1"), "dlv_1"},
	}

	type outcome struct {
		scheme, id string
		err        error
	}
	var wg sync.WaitGroup
	const runs = 8
	outcomes := make(chan outcome, runs*len(samples))
	for range runs {
		for scheme, s := range samples {
			wg.Go(func() {
				ev, err := s.v.Verify(s.body, s.header, now)
				outcomes <- outcome{scheme, ev.ID, err}
			})
		}
	}
	wg.Wait()
	close(outcomes)
	seen := map[string]int{}
	for o := range outcomes {
		require.NoError(t, o.err, o.scheme)
		require.Equal(t, samples[o.scheme].id, o.id, o.scheme)
		seen[o.scheme]++
	}
	require.Len(t, seen, 5, "one verifier of each scheme")
}
