package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

var schemes = []string{
	SchemeStripe, SchemeGitHub, SchemeShopify, SchemeStandardWebhooks, SchemeHMAC,
	SchemePaddle, SchemeSquare, SchemeEasyPost, SchemeAdyen, SchemePayPal, SchemeEd25519, SchemeECDSA,
}

// schemeSettings says which schemes each scheme-specific provider key
// applies to; on any other it is an error, so that a misplaced key is not
// silently ignored.
var schemeSettings = []struct {
	key     string
	value   func(Provider) string
	schemes []string
}{
	{"header", func(p Provider) string { return p.Header }, []string{SchemeHMAC, SchemeEd25519, SchemeECDSA}},
	{"prefix", func(p Provider) string { return p.Prefix }, []string{SchemeHMAC}},
	{"encoding", func(p Provider) string { return p.Encoding }, []string{SchemeHMAC, SchemeEd25519, SchemeECDSA}},
	{"id_from", func(p Provider) string { return p.IDFrom }, []string{SchemeHMAC, SchemeEd25519, SchemeECDSA}},
	{"type_from", func(p Provider) string { return p.TypeFrom }, []string{SchemeHMAC, SchemeEd25519, SchemeECDSA}},
	{"timestamp_header", func(p Provider) string { return p.TimestampHeader }, []string{SchemeHMAC, SchemeEd25519, SchemeECDSA}},
	{"notification_url", func(p Provider) string { return p.NotificationURL }, []string{SchemeSquare}},
	{"webhook_id", func(p Provider) string { return p.WebhookID }, []string{SchemePayPal}},
	{"cert_file", func(p Provider) string { return p.CertFile }, []string{SchemePayPal}},
	{"ca_file", func(p Provider) string { return p.CAFile }, []string{SchemePayPal}},
}

// publicKeyScheme reports whether scheme verifies with public keys
// (public_keys_env) rather than secrets.
func publicKeyScheme(scheme string) bool { return scheme == SchemeEd25519 || scheme == SchemeECDSA }

// validateProviders checks each provider and returns the names of them
// all, for the routes' provider keys.
func (c *Config) validateProviders(v *validator) map[string]bool {
	if len(c.Providers) == 0 {
		v.add("providers", "at least one provider is required")
	}
	providers := map[string]bool{}
	for i, p := range c.Providers {
		key := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.Name == "":
			v.add(key+".name", "is required")
		case !nameRE.MatchString(p.Name):
			v.add(key+".name", "%q must be lower-case letters, digits, - or _ (at most 63), starting with a letter or digit", p.Name)
		case providers[p.Name]:
			v.add(key+".name", "%q is used by another provider", p.Name)
		}
		providers[p.Name] = true
		v.provider(key, p)
	}
	return providers
}

func (v *validator) provider(key string, p Provider) {
	known := false
	for _, s := range schemes {
		known = known || p.Scheme == s
	}
	switch {
	case p.Scheme == "":
		v.add(key+".scheme", "is required (one of %s)", strings.Join(schemes, ", "))
	case !known:
		v.add(key+".scheme", "%q is not a known scheme (one of %s)", p.Scheme, strings.Join(schemes, ", "))
	}
	secrets := len(p.SecretsEnv) + len(p.SecretsFile)
	publicKeys := len(p.PublicKeysEnv) + len(p.PublicKeysFile)
	// refuse names each of keys that is set: they do not apply to the scheme.
	refuse := func(why string, keys map[string]int) {
		for _, k := range []string{"secrets_env", "secrets_file", "public_keys_env", "public_keys_file"} {
			if keys[k] > 0 {
				v.add(key+"."+k, "%s", why)
			}
		}
	}
	switch {
	case !known:
	case p.Scheme == SchemePayPal:
		refuse("does not apply to scheme paypal, which verifies with cert_file", map[string]int{
			"secrets_env": len(p.SecretsEnv), "secrets_file": len(p.SecretsFile),
			"public_keys_env": len(p.PublicKeysEnv), "public_keys_file": len(p.PublicKeysFile)})
	case publicKeyScheme(p.Scheme):
		refuse(fmt.Sprintf("does not apply to scheme %s, which verifies with public_keys_env", p.Scheme), map[string]int{
			"secrets_env": len(p.SecretsEnv), "secrets_file": len(p.SecretsFile)})
		if publicKeys == 0 {
			v.add(key+".public_keys_env", "at least one environment variable name (or public_keys_file) is required for scheme %s", p.Scheme)
		}
	default:
		if secrets == 0 {
			v.add(key+".secrets_env", "at least one environment variable name is required")
		}
		refuse(fmt.Sprintf("applies only to scheme ed25519, ecdsa, not %s", p.Scheme), map[string]int{
			"public_keys_env": len(p.PublicKeysEnv), "public_keys_file": len(p.PublicKeysFile)})
	}
	for j, name := range p.SecretsEnv {
		if !envRE.MatchString(name) {
			v.add(fmt.Sprintf("%s.secrets_env[%d]", key, j), "%q is not an environment variable name", name)
		}
	}
	for j, name := range p.PublicKeysEnv {
		if !envRE.MatchString(name) {
			v.add(fmt.Sprintf("%s.public_keys_env[%d]", key, j), "%q is not an environment variable name", name)
		}
	}
	for _, f := range []struct {
		field string
		paths []string
	}{{"secrets_file", p.SecretsFile}, {"public_keys_file", p.PublicKeysFile}} {
		for j, path := range f.paths {
			v.filePath(fmt.Sprintf("%s.%s[%d]", key, f.field, j), path)
		}
	}
	v.positive(key+".tolerance", p.Tolerance)
	if p.OnFailedRedelivery != RedeliveryReopen && p.OnFailedRedelivery != RedeliveryAck {
		v.add(key+".on_failed_redelivery", "%q must be reopen or ack", p.OnFailedRedelivery)
	}
	if p.ReplayGuard != ReplayGuardOff && p.ReplayGuard != ReplayGuardBody {
		v.add(key+".replay_guard", "%q must be off or body", p.ReplayGuard)
	}
	if p.ScopeFrom != "" {
		if err := validSource(p.ScopeFrom); err != nil {
			v.add(key+".scope_from", "%q %v", p.ScopeFrom, err)
		}
	}
	if !known {
		return
	}
	v.reconcile(key, p)
	for _, s := range schemeSettings {
		if s.value(p) != "" && !slices.Contains(s.schemes, p.Scheme) {
			v.add(key+"."+s.key, "applies only to scheme %s, not %s", strings.Join(s.schemes, ", "), p.Scheme)
		}
	}

	switch p.Scheme {
	case SchemeSquare:
		if p.NotificationURL == "" {
			v.add(key+".notification_url", "is required for scheme square (the URL exactly as configured in Square)")
		} else if u, err := url.Parse(p.NotificationURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(key+".notification_url", "must be an absolute http or https URL")
		}
	case SchemePayPal:
		if p.WebhookID == "" {
			v.add(key+".webhook_id", "is required for scheme paypal (the id PayPal gave the webhook)")
		}
		if p.CertFile == "" {
			v.add(key+".cert_file", "is required for scheme paypal (PayPal's signing certificate: a PEM file or a directory of them)")
		}
		if p.CAFile == "" {
			v.add(key+".ca_file", "is required for scheme paypal (the CA bundle PayPal's certificate must chain to)")
		}
	case SchemeHMAC, SchemeEd25519, SchemeECDSA:
		v.signatureHeaders(key, p)
	}
}

// signatureHeaders checks the keys of hmac, ed25519 and ecdsa: where the
// signature, the timestamp and the event's fields are read.
func (v *validator) signatureHeaders(key string, p Provider) {
	if p.Header == "" {
		v.add(key+".header", "is required for scheme %s", p.Scheme)
	}
	switch {
	case p.Encoding == "hex", p.Encoding == "base64":
	case p.Encoding == "" && publicKeyScheme(p.Scheme):
	default:
		v.add(key+".encoding", "%q must be hex or base64 for scheme %s", p.Encoding, p.Scheme)
	}
	if publicKeyScheme(p.Scheme) && p.TimestampHeader == "" {
		v.add(key+".timestamp_header", "is required for scheme %s (the header holding the signed unix timestamp)", p.Scheme)
	}
	if p.IDFrom == "" {
		v.add(key+".id_from", "is required for scheme %s (header:NAME or json:dotted.path)", p.Scheme)
	} else if err := validSource(p.IDFrom); err != nil {
		v.add(key+".id_from", "%q %v", p.IDFrom, err)
	}
	if p.TypeFrom != "" {
		if err := validSource(p.TypeFrom); err != nil {
			v.add(key+".type_from", "%q %v", p.TypeFrom, err)
		}
	}
}

func validSource(s string) error {
	kind, arg, ok := strings.Cut(s, ":")
	if !ok || (kind != "header" && kind != "json") || arg == "" || strings.ContainsAny(arg, " \t") {
		return errors.New("must be header:NAME or json:dotted.path")
	}
	return nil
}
