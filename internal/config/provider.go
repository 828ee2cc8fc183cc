package config

import (
	"strings"
)

// Scheme names accepted in Provider.Scheme.
const (
	SchemeStripe           = "stripe"
	SchemeGitHub           = "github"
	SchemeShopify          = "shopify"
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeHMAC             = "hmac"
	SchemePaddle           = "paddle"
	SchemeSquare           = "square"
	SchemeEasyPost         = "easypost"
	SchemeAdyen            = "adyen"
	SchemePayPal           = "paypal"
	SchemeEd25519          = "ed25519"
	SchemeECDSA            = "ecdsa"
)

// Values of Provider.ReplayGuard.
const (
	ReplayGuardOff  = "off"
	ReplayGuardBody = "body"
)

// Values of Provider.OnFailedRedelivery.
const (
	RedeliveryReopen = "reopen"
	RedeliveryAck    = "ack"
)

// Provider is one webhook sender, served at POST /webhooks/{Name}.
type Provider struct {
	// Name is the URL path segment and the first half of every delivery key.
	Name string `yaml:"name"`
	// Scheme is the signature scheme: stripe, github, shopify,
	// standard-webhooks, hmac, paddle, square, easypost, adyen, paypal,
	// ed25519 or ecdsa.
	Scheme string `yaml:"scheme"`
	// SecretsEnv names environment variables holding signing secrets; a
	// request signed with any one of them is accepted, which is how secrets
	// rotate. Every scheme but paypal, ed25519 and ecdsa needs at least one.
	SecretsEnv []string `yaml:"secrets_env"`
	// SecretsFile names files holding signing secrets, beside SecretsEnv
	// (a mounted Kubernetes secret): ingest reads them at start and again
	// whenever they change, so a rotation needs no restart. One trailing
	// newline is not part of the secret.
	SecretsFile []string `yaml:"secrets_file"`
	// PublicKeysEnv names environment variables holding public keys, for
	// ed25519 and ecdsa (which have no secret); any one may verify.
	PublicKeysEnv []string `yaml:"public_keys_env"`
	// PublicKeysFile names files holding public keys, as SecretsFile.
	PublicKeysFile []string `yaml:"public_keys_file"`
	// Tolerance is how far a signed timestamp may be from now, in either
	// direction, for schemes that sign one. Default 5m.
	Tolerance Duration `yaml:"tolerance"`
	// OnFailedRedelivery is what a redelivery of a failed event does: reopen
	// (run the failed deliveries again) or ack (answer duplicate). Default reopen.
	OnFailedRedelivery string `yaml:"on_failed_redelivery"`
	// ReplayGuard is off or body. With body, a verified body byte-identical
	// to the body of an existing claim of this provider under another event
	// id is a duplicate: it defends schemes whose signature does not cover
	// the id against a captured request re-sent under a new id, at the cost
	// of collapsing two distinct events that happen to have identical
	// bodies. Default body for github, shopify, and hmac with a header id
	// and no timestamp_header, and ed25519 and ecdsa with a header id; off
	// for the others, which sign the id.
	ReplayGuard string `yaml:"replay_guard"`
	// ScopeFrom, optional on any scheme, is "header:NAME" or
	// "json:dotted.path": a verified value that is joined to the event id
	// (scope:id), for providers whose ids are unique only per account or
	// shop. A request without it is refused with 400. Changing it changes
	// the delivery keys of the provider's events.
	ScopeFrom string `yaml:"scope_from"`
	// Cell names the cell that holds this provider's events (see
	// Config.Cells). Default: the first cell.
	Cell string `yaml:"cell"`

	// NotificationURL is the URL Square signs in front of the body (square only).
	NotificationURL string `yaml:"notification_url"`
	// WebhookID is the id PayPal gave the webhook (paypal only).
	WebhookID string `yaml:"webhook_id"`
	// CertFile is PayPal's signing certificate, a PEM file or a directory
	// of them, read at start (paypal only).
	CertFile string `yaml:"cert_file"`
	// CAFile is the PEM bundle the certificates must chain to (paypal only).
	CAFile string `yaml:"ca_file"`

	// The fields below apply to the generic hmac scheme; header, encoding,
	// id_from, type_from and timestamp_header also to ed25519 and ecdsa.

	// Header holds the signature.
	Header string `yaml:"header"`
	// Prefix is stripped from the header value before decoding, e.g. "sha256=".
	Prefix string `yaml:"prefix"`
	// Encoding of the signature: hex or base64.
	Encoding string `yaml:"encoding"`
	// IDFrom is where the event id comes from: "header:NAME" or "json:dotted.path".
	IDFrom string `yaml:"id_from"`
	// TypeFrom is where the event type comes from, same syntax; optional.
	TypeFrom string `yaml:"type_from"`
	// TimestampHeader, when set, names a header with a unix timestamp that is
	// signed as timestamp + "." + body and checked against Tolerance.
	TimestampHeader string `yaml:"timestamp_header"`

	// Reconcile, when set (stripe and github only), fetches from the
	// provider's API the events it never delivered (see Reconcile).
	Reconcile *Reconcile `yaml:"reconcile"`
}

// defaultReplayGuard is body for the schemes whose signature does not cover
// the event id, so that one captured request cannot mint new events.
func (p Provider) defaultReplayGuard() string {
	switch {
	case p.Scheme == SchemeGitHub, p.Scheme == SchemeShopify,
		p.Scheme == SchemeHMAC && strings.HasPrefix(p.IDFrom, "header:") && p.TimestampHeader == "",
		// The public-key schemes sign the timestamp and the body, not the
		// headers: a header id is unsigned, and within the tolerance a
		// captured request could be re-sent under another.
		(p.Scheme == SchemeEd25519 || p.Scheme == SchemeECDSA) && strings.HasPrefix(p.IDFrom, "header:"):
		return ReplayGuardBody
	}
	return ReplayGuardOff
}
