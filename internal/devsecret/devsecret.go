// Package devsecret makes and keeps the secrets of the local system that
// `make run` starts: console passwords and tokens generated once, kept in
// the local directory for their owner only, and the banner lines that say
// how to sign in. Nothing in it is for a real deployment.
package devsecret

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookgate/hookgate/internal/config"
)

// Login is one console user as the banner shows it: the password
// devtool keeps for it, or the variable the user set.
type Login struct {
	Name, Role string
	// Env is the variable the worker reads the password from.
	Env string
	// Password and File are the password devtool generated (once, kept in
	// File); both empty when the environment already set Env.
	Password, File string
}

// Console gives every console password_env and token_env that
// getenv leaves unset a value of its own, generated on the first run and
// kept in dir (mode 0600), so that the console works on `make run` with
// nothing exported, and with the same password from run to run. It
// returns the variables to set and the users to name in the banner.
func Console(cfg *config.Config, getenv func(string) string, dir string) (map[string]string, []Login, error) {
	env := map[string]string{}
	var logins []Login
	for _, u := range cfg.Console.Users {
		if u.PasswordEnv == "" {
			continue // a password_file: the user's own
		}
		l := Login{Name: u.Name, Role: u.Role, Env: u.PasswordEnv}
		if getenv(u.PasswordEnv) == "" {
			l.File = filepath.Join(dir, "console-password-"+u.Name)
			var err error
			if l.Password, err = keptSecret(l.File); err != nil {
				return nil, nil, err
			}
			env[u.PasswordEnv] = l.Password
		}
		logins = append(logins, l)
	}
	for _, t := range cfg.Console.Tokens {
		if t.TokenEnv == "" || getenv(t.TokenEnv) != "" {
			continue
		}
		token, err := keptSecret(filepath.Join(dir, "console-token-"+t.Name))
		if err != nil {
			return nil, nil, err
		}
		env[t.TokenEnv] = token
	}
	return env, logins, nil
}

// keptSecret reads the secret kept in path, or makes one (24 characters
// from 18 random bytes) and keeps it there, readable by its owner only.
func keptSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(b)); len(s) >= config.MinConsoleSecret {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", fmt.Errorf("keeping %s to its owner: %w", path, err)
			}
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading the console secret kept in %s: %w", path, err)
	}
	raw := make([]byte, 18)
	_, _ = rand.Read(raw)
	s := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("making %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keeping the console secret in %s: %w", path, err)
	}
	return s, os.Chmod(path, 0o600) // WriteFile leaves an existing file's mode
}

// Banner is the banner's lines for the console: its URL and how
// each user signs in.
func Banner(cfg *config.Config, workerURL string, logins []Login) string {
	if !cfg.Console.Enabled() {
		return fmt.Sprintf("  console   off; name a user under console: to serve it at %s/console/\n", workerURL)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  console   %s/console/\n", workerURL)
	for _, l := range logins {
		if l.Password != "" {
			fmt.Fprintf(&b, "            sign in as %s (%s), password %s  (kept in %s)\n", l.Name, l.Role, l.Password, l.File)
		} else {
			fmt.Fprintf(&b, "            sign in as %s (%s), password $%s\n", l.Name, l.Role, l.Env)
		}
	}
	return b.String()
}
