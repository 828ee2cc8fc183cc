package ingest

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/sanitize"
	"github.com/hookgate/hookgate/internal/secretfile"
	"github.com/hookgate/hookgate/internal/verify"
)

type acceptAll struct{}

func (acceptAll) Verify([]byte, http.Header, time.Time) (verify.Event, error) {
	return verify.Event{}, nil
}

// TestRotatedProviderSecretJoinsTheRedactor: a secret a provider's file
// brings in after start joins the server's redactor as soon as it is in
// use, not at the next restart.
func TestRotatedProviderSecretJoinsTheRedactor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte("secret-at-start-0001\n"), 0o600))
	red := sanitize.NewRedactor()
	s := (&Server{}).WithRedactor(red)
	fv, err := newFileVerifier("paddle", []secretFile{{path: path, key: "providers[0].secrets_file[0]"}}, nil,
		func([][]byte) (verify.Verifier, error) { return acceptAll{}, nil },
		secretfile.Resolver{Logger: slog.New(slog.DiscardHandler), Redact: s.redactNew})
	require.NoError(t, err)

	const rotated = "secret-rotated-0002"
	require.NoError(t, os.WriteFile(path, []byte(rotated+"\n"), 0o600))
	require.Eventually(t, func() bool {
		_, _ = fv.Verify(nil, http.Header{}, time.Now()) // a request reads the files again
		return red.String("got "+rotated) == "got "+sanitize.Redacted
	}, 30*time.Second, 20*time.Millisecond, "the rotated secret was never redacted")
}
