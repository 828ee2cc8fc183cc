package reconcile_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/reconcile"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/secretfile"
)

// TestGitHubAppWebhook: with hook: app, the App's own webhook's deliveries
// are listed and redelivered as the App, with an RS256 JWT GitHub can
// verify with the App's public key (issuer: the App's id, at most ten
// minutes long); a key file that is not an RSA key stops the start naming
// its key.
func TestGitHubAppWebhook(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))

	fake := newFakeGitHub(t, "", "app/hook")
	var seen []string
	fake.auth = func(h string) bool {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return false
		}
		var claims jwt.RegisteredClaims
		parsed, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return &key.PublicKey, nil },
			jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer("4242"))
		if err != nil || !parsed.Valid || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute {
			return false
		}
		seen = append(seen, tok)
		return true
	}
	now := time.Now()
	fake.add(11, "app-missed", 500, false, now.Add(-time.Hour))
	fake.add(12, "app-ok", 200, false, now.Add(-time.Hour))

	cfgText := fmt.Sprintf(`providers:
  - name: gh-app
    scheme: github
    secrets_env: [GH_SECRET]
    reconcile: {hook: app, app_id: 4242, private_key_file: %q, api_base: %q}
routes:
  - {name: gh, provider: gh-app, events: ["*"], url: "http://127.0.0.1:9/gh"}
`, keyFile, fake.URL)
	cfg, err := config.Parse([]byte(cfgText))
	require.NoError(t, err)
	table, err := route.New(cfg, nil)
	require.NoError(t, err)
	db := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(db.Pool, client, table.MaxAttempts)
	opts := reconcile.Options{Config: cfg, Routes: table, Stores: func(string) reconcile.Store { return store },
		Getenv: func(string) string { return "" }, Resolver: secretfile.Resolver{}, Logger: slog.New(slog.DiscardHandler)}
	r, err := reconcile.New(opts)
	require.NoError(t, err)

	rec, err := r.Run(t.Context(), reconcile.Run{Provider: "gh-app", Trigger: claim.TriggerCLI})
	require.NoError(t, err)
	require.Equal(t, 1, rec.Redelivered)
	require.Equal(t, []string{"/app/hook/deliveries/11/attempts"}, fake.posts())
	require.Len(t, seen, 2, "the list and the redelivery, each as the App")

	require.NoError(t, os.WriteFile(keyFile, []byte("not a key"), 0o600))
	_, err = reconcile.New(opts)
	require.ErrorContains(t, err, "providers[0].reconcile.private_key_file")
	require.ErrorContains(t, err, "is not an RSA private key in PEM form")
}
