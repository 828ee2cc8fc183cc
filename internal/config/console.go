package config

import (
	"cmp"
	"fmt"
	"time"
)

// Console roles.
const (
	// RoleViewer reads everything except payloads and attempt responses.
	RoleViewer = "viewer"
	// RoleOperator reads everything and may act: retry, pause, resume.
	RoleOperator = "operator"
)

// DefaultSessionTTL is console.session_ttl when unset.
const DefaultSessionTTL = 12 * time.Hour

// Console configures the operator API (/api/v1/) and the web console
// (/console/) on worker.listen. With neither users nor tokens, both are off
// and answer 404.
type Console struct {
	// Users sign in to the console's form, or use HTTP Basic on the API.
	Users []ConsoleUser `yaml:"users"`
	// Tokens are for programs: Authorization: Bearer on the API.
	Tokens []ConsoleToken `yaml:"tokens"`
	// SessionTTL is how long a console sign-in lasts. Default 12h.
	SessionTTL Duration `yaml:"session_ttl"`
	// ReadPool bounds the connections the API and the console read
	// through.
	ReadPool ReadPool `yaml:"read_pool"`
}

// ConsoleUser is one person who may use the console and the API.
type ConsoleUser struct {
	Name string `yaml:"name"`
	// Role is viewer or operator.
	Role string `yaml:"role"`
	// PasswordEnv names the environment variable holding the password.
	PasswordEnv string `yaml:"password_env"`
	// PasswordFile names a file holding it instead, read again when it
	// changes. Exactly one of the two.
	PasswordFile string `yaml:"password_file"`
}

// ConsoleToken is one program that may use the API.
type ConsoleToken struct {
	Name string `yaml:"name"`
	// Role is viewer or operator.
	Role string `yaml:"role"`
	// TokenEnv names the environment variable holding the bearer token.
	TokenEnv string `yaml:"token_env"`
	// TokenFile names a file holding it instead, read again when it
	// changes. Exactly one of the two.
	TokenFile string `yaml:"token_file"`
}

// Enabled reports whether the API and console are served.
func (c Console) Enabled() bool { return len(c.Users) > 0 || len(c.Tokens) > 0 }

// MinConsoleSecret is the shortest password or token accepted: the API
// answers every guess, and only the lockout slows guessing a password.
const MinConsoleSecret = 12

func (c *Console) setDefaults() {
	if c.Enabled() {
		c.ReadPool.setDefaults()
		c.SessionTTL = cmp.Or(c.SessionTTL, Duration(DefaultSessionTTL))
	}
}

func (v *validator) console(c Console) {
	names := map[string]string{}
	check := func(key, name, role, envKey, env, fileKey, file string) {
		switch {
		case name == "":
			v.add(key+".name", "is required")
		case !nameRE.MatchString(name):
			v.add(key+".name", "%q must be lower-case letters, digits, - or _ (at most 63), starting with a letter or digit", name)
		case names[name] != "":
			v.add(key+".name", "%q is already used by %s: every actor in the audit has one name", name, names[name])
		default:
			names[name] = key
		}
		if role != RoleViewer && role != RoleOperator {
			v.add(key+".role", "%q must be viewer or operator", role)
		}
		switch {
		case env == "" && file == "":
			v.add(key+"."+envKey, "is required (or %s)", fileKey)
		case env != "" && file != "":
			v.add(key+"."+fileKey, "is set beside %s: name the secret once", envKey)
		case env != "" && !envRE.MatchString(env):
			v.add(key+"."+envKey, "%q is not an environment variable name", env)
		case file != "":
			v.filePath(key+"."+fileKey, file)
		}
	}
	for i, u := range c.Users {
		check(fmt.Sprintf("console.users[%d]", i), u.Name, u.Role, "password_env", u.PasswordEnv, "password_file", u.PasswordFile)
	}
	for i, t := range c.Tokens {
		check(fmt.Sprintf("console.tokens[%d]", i), t.Name, t.Role, "token_env", t.TokenEnv, "token_file", t.TokenFile)
	}
	if c.Enabled() {
		v.positive("console.session_ttl", c.SessionTTL)
		v.readPool(c.ReadPool)
	}
}

// ConsoleSecrets holds the console's passwords and tokens by user or
// token name. Its values are never logged or printed.
type ConsoleSecrets struct {
	Passwords map[string]string
	Tokens    map[string]string
}

// CheckConsoleSecret is the rule a console password or token meets, from
// the environment or from a file, at start and whenever the file is read
// again: at least MinConsoleSecret characters.
func CheckConsoleSecret(b []byte) error {
	if len(b) < MinConsoleSecret {
		return fmt.Errorf("holds fewer than %d characters", MinConsoleSecret)
	}
	return nil
}

// ResolveConsoleSecrets reads the variables console.users and
// console.tokens name (not their password_file and token_file, which the
// worker opens itself, under the same CheckConsoleSecret). A variable that
// is unset, empty or shorter than MinConsoleSecret characters is an error
// naming the key and the variable, never a value.
// Only the worker, which serves the console, calls it.
func (c *Config) ResolveConsoleSecrets(getenv func(string) string) (ConsoleSecrets, error) {
	s := ConsoleSecrets{Passwords: map[string]string{}, Tokens: map[string]string{}}
	var v validator
	read := func(key, env string) (string, bool) {
		val := getenv(env)
		if val == "" {
			v.add(key, "environment variable %s is not set or empty", env)
			return "", false
		}
		if err := CheckConsoleSecret([]byte(val)); err != nil {
			v.add(key, "environment variable %s %s", env, err)
			return "", false
		}
		return val, true
	}
	for i, u := range c.Console.Users {
		if u.PasswordFile != "" {
			continue // read by the worker, which reads it again when it changes
		}
		if val, ok := read(fmt.Sprintf("console.users[%d].password_env", i), u.PasswordEnv); ok {
			s.Passwords[u.Name] = val
		}
	}
	for i, t := range c.Console.Tokens {
		if t.TokenFile != "" {
			continue
		}
		if val, ok := read(fmt.Sprintf("console.tokens[%d].token_env", i), t.TokenEnv); ok {
			s.Tokens[t.Name] = val
		}
	}
	return s, v.err()
}
