// Package verify checks webhook signatures on raw request bytes and normalizes the event.
package verify

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Scheme names accepted in Config.Scheme.
const (
	schemeStripe           = "stripe"
	schemeGitHub           = "github"
	schemeShopify          = "shopify"
	schemeStandardWebhooks = "standard-webhooks"
	schemeHMAC             = "hmac"
	schemePaddle           = "paddle"
	schemeSquare           = "square"
	schemeEasyPost         = "easypost"
	schemeAdyen            = "adyen"
	schemePayPal           = "paypal"
	schemeEd25519          = "ed25519"
	schemeECDSA            = "ecdsa"
)

// schemeList is every scheme, in the order messages list them.
const schemeList = "stripe, github, shopify, standard-webhooks, hmac, paddle, square, easypost, adyen, paypal, ed25519 or ecdsa"

// defaultTolerance is used when Config.Tolerance is zero. Five minutes is what
// Stripe and the Standard Webhooks libraries use: wide enough for ordinary
// clock skew and queueing at the sender, narrow enough to bound replays.
const defaultTolerance = 5 * time.Minute

// Config selects a scheme and holds what it needs to verify a request.
type Config struct {
	// Scheme is one of "stripe", "github", "shopify", "standard-webhooks",
	// "hmac", "paddle", "square", "easypost", "adyen", "paypal", "ed25519"
	// or "ecdsa".
	Scheme string

	// Secrets are the signing secrets; a request signed with any one of them
	// is accepted, which is how a secret is rotated. At least one is required
	// and none may be empty.
	//
	// For stripe the whsec_... string's bytes are the HMAC key as they are.
	// For standard-webhooks each is "whsec_" followed by the base64 of the
	// key (raw base64 without the prefix is accepted too); New decodes it.
	// For github, shopify, hmac, paddle and square the bytes are the HMAC
	// key. For easypost they are NFKD-normalized first, as EasyPost's own
	// libraries do; for adyen they are the hex spelling of the key.
	// For ed25519 and ecdsa each is a public key, not a secret (see
	// ed25519.go and ecdsa.go for the spellings accepted). paypal takes
	// none: it verifies with the certificates of CertFile.
	Secrets [][]byte

	// Tolerance is how far a signed timestamp may be from now, in either
	// direction. It applies to stripe, standard-webhooks, and hmac with a
	// TimestampHeader; other schemes sign no timestamp and ignore it.
	// Zero means 5m; negative is an error.
	Tolerance time.Duration

	// The fields below apply to the generic "hmac" scheme and, except
	// Prefix, to the public-key schemes "ed25519" and "ecdsa"; New rejects
	// them for any other scheme so that a misplaced setting is not silently
	// ignored. For hmac the signature is HMAC-SHA256.

	// Header names the header holding the signature. Required.
	Header string
	// Prefix, when set, must begin the header value and is stripped before
	// decoding, e.g. "sha256=". hmac only.
	Prefix string
	// Encoding of the signature: "hex" or "base64" (standard, padded).
	// Required for hmac; ed25519 defaults to hex, ecdsa to base64.
	Encoding string
	// IDFrom is where the event id is read: "header:NAME" or
	// "json:dotted.path" (object keys only, no array indexes). Required.
	IDFrom string
	// TypeFrom is where the event type is read, with IDFrom's syntax.
	// Optional: when empty, Event.Type is "".
	TypeFrom string
	// TimestampHeader, when set, names a header holding unix seconds; the
	// signed content is then timestamp + "." + body and Tolerance applies.
	// For ed25519 and ecdsa it is required and the signed content is
	// timestamp + body, with no separator.
	TimestampHeader string

	// NotificationURL is the URL Square signs in front of the body: the
	// notification URL exactly as configured in Square. square only, required.
	NotificationURL string

	// WebhookID, CertFile and CAFile apply to paypal only, and are required
	// there. WebhookID is the id PayPal gave the webhook; it is part of
	// the signed content. CertFile is a PEM file, or a directory of PEM
	// files, holding PayPal's signing certificates; CAFile is a PEM bundle
	// that each of them must chain to. Both are read once, by New: nothing
	// is ever fetched while verifying.
	WebhookID string
	CertFile  string
	CAFile    string

	// ScopeFrom, when set (any scheme), is where a scope is read once the
	// signature is verified: "header:NAME" or "json:dotted.path". The
	// event id becomes scope + ":" + id, so ids that are unique only per
	// account or shop are claimed once per account or shop. A missing or
	// malformed scope is ErrInvalid.
	ScopeFrom string
}

// Event is the normalized identity of a verified webhook: what the claim is
// keyed on and what routes match against.
type Event struct {
	// ID is the provider's event id, always ValidID.
	ID string
	// Type is the provider's event type (e.g. "checkout.session.completed"),
	// ValidID when set. Empty only for the hmac scheme without TypeFrom.
	Type string
	// ObjectID names the object the event is about, when the scheme has an
	// obvious one (stripe data.object.id, standard-webhooks data.id, shopify
	// id); empty otherwise or when the body's value is not ValidID. It is
	// informational and never a reason to reject a request.
	ObjectID string
	// Body is the body as parsed to find the above (numbers as
	// json.Number), so that routes read it without parsing it again; nil
	// when the scheme did not parse it. Callers must not change it.
	Body map[string]any
}

// Verifier checks one provider's requests. Implementations are safe for
// concurrent use: they hold only what New computed.
type Verifier interface {
	// Verify checks the signature over body (raw bytes, before any parsing)
	// and returns the normalized event. The signature is checked before the
	// body is parsed, so an unauthenticated request never yields an Event and
	// never costs a JSON decode. Errors are *Error wrapping ErrUnauthorized
	// or ErrInvalid.
	Verify(body []byte, h http.Header, now time.Time) (Event, error)
}

// New returns the Verifier for c.Scheme. It fails on an unknown scheme, no
// or empty secrets, a negative tolerance, a standard-webhooks secret that is
// not base64, and missing, malformed or misplaced hmac settings, so that a
// bad provider entry stops the binary at start rather than 401ing every
// delivery. Error messages name the setting, never a secret's value.
func New(c Config) (Verifier, error) {
	v, err := newVerifier(c)
	if err != nil || c.ScopeFrom == "" {
		return v, err
	}
	return newScopedVerifier(v, c.ScopeFrom)
}

// newVerifier is New without the scope.
func newVerifier(c Config) (Verifier, error) {
	if c.Scheme == schemePayPal {
		if len(c.Secrets) > 0 {
			return nil, errors.New("scheme paypal takes no secrets: it verifies with cert_file")
		}
	} else if len(c.Secrets) == 0 {
		return nil, errors.New("no secrets configured")
	}
	secrets := make([][]byte, len(c.Secrets))
	for i, s := range c.Secrets {
		if len(s) == 0 {
			return nil, fmt.Errorf("secret %d of %d is empty", i+1, len(c.Secrets))
		}
		// Cloned so that a caller reusing its buffers cannot change a live verifier.
		secrets[i] = bytes.Clone(s)
	}
	if c.Tolerance < 0 {
		return nil, fmt.Errorf("tolerance %s is negative", c.Tolerance)
	}
	tolerance := cmp.Or(c.Tolerance, defaultTolerance)

	if key, schemes := misplacedSetting(c); key != "" {
		return nil, fmt.Errorf("%s applies only to scheme %s, not %q", key, strings.Join(schemes, ", "), c.Scheme)
	}

	switch c.Scheme {
	case schemeStripe:
		return &timestampedVerifier{scheme: stripeScheme, secrets: secrets, tolerance: tolerance}, nil
	case schemeGitHub:
		return &githubVerifier{secrets: secrets}, nil
	case schemeShopify:
		return &shopifyVerifier{secrets: secrets}, nil
	case schemeStandardWebhooks:
		return newStandardWebhooksVerifier(secrets, tolerance)
	case schemeHMAC:
		return newHMACVerifier(c, secrets, tolerance)
	case schemePaddle:
		return &timestampedVerifier{scheme: paddleScheme, secrets: secrets, tolerance: tolerance}, nil
	case schemeSquare:
		return newSquareVerifier(c, secrets)
	case schemeEasyPost:
		return newEasyPostVerifier(secrets), nil
	case schemeAdyen:
		return newAdyenVerifier(secrets)
	case schemePayPal:
		return newPayPalVerifier(c, tolerance)
	case schemeEd25519, schemeECDSA:
		return newPublicKeyVerifier(c, secrets, tolerance)
	case "":
		return nil, errors.New("scheme is required")
	default:
		return nil, fmt.Errorf("unknown scheme %q (want %s)", c.Scheme, schemeList)
	}
}

// settingSchemes says which schemes each scheme-specific setting applies to.
var settingSchemes = []struct {
	key     string
	value   func(Config) string
	schemes []string
}{
	{"header", func(c Config) string { return c.Header }, []string{schemeHMAC, schemeEd25519, schemeECDSA}},
	{"prefix", func(c Config) string { return c.Prefix }, []string{schemeHMAC}},
	{"encoding", func(c Config) string { return c.Encoding }, []string{schemeHMAC, schemeEd25519, schemeECDSA}},
	{"id_from", func(c Config) string { return c.IDFrom }, []string{schemeHMAC, schemeEd25519, schemeECDSA}},
	{"type_from", func(c Config) string { return c.TypeFrom }, []string{schemeHMAC, schemeEd25519, schemeECDSA}},
	{"timestamp_header", func(c Config) string { return c.TimestampHeader }, []string{schemeHMAC, schemeEd25519, schemeECDSA}},
	{"notification_url", func(c Config) string { return c.NotificationURL }, []string{schemeSquare}},
	{"webhook_id", func(c Config) string { return c.WebhookID }, []string{schemePayPal}},
	{"cert_file", func(c Config) string { return c.CertFile }, []string{schemePayPal}},
	{"ca_file", func(c Config) string { return c.CAFile }, []string{schemePayPal}},
}

// misplacedSetting returns the config key of the first scheme-specific
// setting that is set but does not apply to c.Scheme, with the schemes it
// applies to, or "".
func misplacedSetting(c Config) (string, []string) {
	for _, s := range settingSchemes {
		if s.value(c) != "" && !slices.Contains(s.schemes, c.Scheme) {
			return s.key, s.schemes
		}
	}
	return "", nil
}

// ValidID reports whether id is 1–255 printable ASCII characters without
// spaces (0x21..0x7E). The id becomes part of a primary key, a downstream
// Idempotency-Key and HTTP header values, so anything that could not travel
// safely in all three is refused at the door. Event types are held to the
// same rule for the same reason.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > 255 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// value is one field read from a header or the body, before it is checked.
type value struct {
	text string
	// present is false for a missing or empty header, and for a JSON field
	// that is missing, null or "".
	present bool
	// scalar is true for headers, JSON strings and JSON numbers; false for
	// objects, arrays and booleans, which are never an id or a type.
	scalar bool
}

// fromHeader reads the first value of header name.
func fromHeader(h http.Header, name string) value {
	v := h.Get(name)
	return value{text: v, present: v != "", scalar: true}
}

// optional returns the text when it is usable as an identifier, else "":
// ObjectID is informational, so a strange one is dropped, not fatal.
func (v value) optional() string {
	if v.present && v.scalar && ValidID(v.text) {
		return v.text
	}
	return ""
}

// checkID reports why v is not a usable event id, or nil.
func checkID(v value) error {
	switch {
	case !v.present:
		return invalid(reasonMissingID, "event id is missing")
	case !v.scalar || !ValidID(v.text):
		return invalid(reasonMalformedID, "event id must be 1-255 printable ASCII characters without spaces")
	}
	return nil
}

// checkType reports why v is not a usable event type, or nil.
func checkType(v value) error {
	switch {
	case !v.present:
		return invalid(reasonMissingType, "event type is missing")
	case !v.scalar || !ValidID(v.text):
		return invalid(reasonMalformedType, "event type must be 1-255 printable ASCII characters without spaces")
	}
	return nil
}

// withBody returns a function that sets the event's parsed body, unless
// normalizing it failed.
func withBody(ev Event, err error) func(map[string]any) (Event, error) {
	return func(body map[string]any) (Event, error) {
		if err != nil {
			return Event{}, err
		}
		ev.Body = body
		return ev, nil
	}
}

// normalize checks the id and type and assembles the Event. It runs only
// after the signature has been verified.
func normalize(id, typ, object value) (Event, error) {
	if err := checkID(id); err != nil {
		return Event{}, err
	}
	if err := checkType(typ); err != nil {
		return Event{}, err
	}
	return Event{ID: id.text, Type: typ.text, ObjectID: object.optional()}, nil
}

// splitBounded splits s at sep into at most limit entries and drops the
// rest, so a header stuffed with entries costs bounded work (each entry may
// cost one HMAC per secret).
func splitBounded(s, sep string, limit int) []string {
	out := make([]string, 0, min(limit, strings.Count(s, sep)+1))
	for len(out) < limit {
		entry, rest, found := strings.Cut(s, sep)
		out = append(out, entry)
		if !found {
			break
		}
		s = rest
	}
	return out
}
