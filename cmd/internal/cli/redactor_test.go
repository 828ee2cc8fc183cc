package cli_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/config"
)

// TestRedactorKnowsEverySecretTheBinariesRead: the console's passwords and
// tokens, the ops password and DATABASE_URL's password are redacted beside
// the secrets the config's providers and routes name.
func TestRedactorKnowsEverySecretTheBinariesRead(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"ALICE_PASSWORD":       "alice-password-0123",
		"CI_TOKEN":             "ci-token-abcdefghijkl",
		"HOOKGATE_UI_PASSWORD": "ui-password-4567",
		"DATABASE_URL":         "postgres://hookgate:db-password-89ab@127.0.0.1:5432/hookgate",
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(dir+"/token", []byte("file-token-cdef0123\n"), 0o600))
	require.NoError(t, os.WriteFile(dir+"/provider", []byte("file-provider-secret-77"), 0o600))
	cfg := &config.Config{
		Providers: []config.Provider{{Name: "p", SecretsFile: []string{dir + "/provider"}}},
		Console: config.Console{
			Users:  []config.ConsoleUser{{Name: "alice", Role: "operator", PasswordEnv: "ALICE_PASSWORD"}},
			Tokens: []config.ConsoleToken{{Name: "ci", Role: "viewer", TokenEnv: "CI_TOKEN"}, {Name: "ops", Role: "viewer", TokenFile: dir + "/token"}},
		}}
	secrets := config.Secrets{Route: map[string][]byte{"r": []byte("whsec_c2lnbmluZy1rZXktMDEyMzQ1")}}
	red := cli.Redactor(cfg, secrets, cli.Env{Getenv: func(k string) string { return env[k] }})
	for _, secret := range []string{"alice-password-0123", "ci-token-abcdefghijkl", "ui-password-4567", "db-password-89ab", "whsec_c2lnbmluZy1rZXktMDEyMzQ1", "file-token-cdef0123", "file-provider-secret-77"} {
		got := red.String("downstream said: " + secret + " is wrong")
		require.NotContains(t, got, secret)
		require.Contains(t, got, "[redacted]")
	}
}
