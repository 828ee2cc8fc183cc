package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Secrets holds the values of the environment variables the config names.
// It is built only by the commands that verify or sign, so that migrate needs
// nothing but DATABASE_URL. Its values are never logged or printed.
type Secrets struct {
	// Provider maps a provider name to its secrets, in the order of
	// secrets_env, or for ed25519 and ecdsa to its public keys, in the
	// order of public_keys_env.
	Provider map[string][][]byte
	// Route maps a route name to its signing secret, for routes that have one.
	Route map[string][]byte
	// Headers maps a route name to its secret_headers with their values,
	// for routes that have some.
	Headers map[string]map[string]string
}

// ResolveSecrets reads every variable named by secrets_env,
// public_keys_env, signing_secret_env and secret_headers through getenv. A variable that is unset or empty is an
// error naming the key and the variable, never a value.
func (c *Config) ResolveSecrets(getenv func(string) string) (Secrets, error) {
	s := Secrets{Provider: map[string][][]byte{}, Route: map[string][]byte{}, Headers: map[string]map[string]string{}}
	var v validator
	for i, p := range c.Providers {
		for j, name := range p.SecretsEnv {
			val := getenv(name)
			if val == "" {
				v.add(fmt.Sprintf("providers[%d].secrets_env[%d]", i, j), "environment variable %s is not set or empty", name)
				continue
			}
			s.Provider[p.Name] = append(s.Provider[p.Name], []byte(val))
		}
		for j, name := range p.PublicKeysEnv {
			key := fmt.Sprintf("providers[%d].public_keys_env[%d]", i, j)
			val := getenv(name)
			if val == "" {
				v.add(key, "environment variable %s is not set or empty", name)
				continue
			}
			s.Provider[p.Name] = append(s.Provider[p.Name], []byte(val))
		}
	}
	for i, r := range c.Routes {
		if r.SigningSecretEnv == "" {
			continue
		}
		val := getenv(r.SigningSecretEnv)
		if val == "" {
			v.add(fmt.Sprintf("routes[%d].signing_secret_env", i), "environment variable %s is not set or empty", r.SigningSecretEnv)
			continue
		}
		s.Route[r.Name] = []byte(val)
	}
	for i, r := range c.Routes {
		for _, header := range slices.Sorted(maps.Keys(r.SecretHeaders)) {
			name := r.SecretHeaders[header]
			key := fmt.Sprintf("routes[%d].secret_headers.%s", i, header)
			val := getenv(name)
			switch {
			case val == "":
				v.add(key, "environment variable %s is not set or empty", name)
				continue
			case strings.ContainsFunc(val, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }):
				v.add(key, "environment variable %s holds a control character (a trailing newline?), which a header value cannot", name)
				continue
			}
			if s.Headers[r.Name] == nil {
				s.Headers[r.Name] = map[string]string{}
			}
			s.Headers[r.Name][header] = val
		}
	}
	return s, v.err()
}

// Values returns every secret value s holds, for a redactor: provider
// secrets, signing secrets (a Standard Webhooks secret also without its
// whsec_ prefix, the form its key is encoded in) and secret header values.
func (s Secrets) Values() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.Provider)) {
		for _, v := range s.Provider[name] {
			out = append(out, string(v))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Route)) {
		v := string(s.Route[name])
		out = append(out, v)
		if key, ok := strings.CutPrefix(v, "whsec_"); ok {
			out = append(out, key)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		h := s.Headers[name]
		for _, header := range slices.Sorted(maps.Keys(h)) {
			out = append(out, h[header])
		}
	}
	return out
}
