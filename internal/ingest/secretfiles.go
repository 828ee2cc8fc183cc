package ingest

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/secretfile"
	"github.com/hookgate/hookgate/internal/verify"
)

// secretFileCheck is how often, at most, a provider's secret files are read
// again to see whether they changed: one small read per provider per
// second under load.
const secretFileCheck = secretfile.Check

// fileVerifier is the verifier of a provider with secrets_file or
// public_keys_file: the files are opened at start through a
// secretfile.Resolver, under its rules (each read again at most every
// secretFileCheck, a file that cannot be read, is empty or holds a bad key
// keeping its last good contents, logged once per problem, and new
// contents redacted before use), and when their contents change the
// verifier is rebuilt from them (and the provider's env secrets), so a
// rotated secret is accepted and the old one refused without a restart.
type fileVerifier struct {
	provider string
	build    func(secrets [][]byte) (verify.Verifier, error)
	fixed    [][]byte
	files    []*secretfile.File
	logger   *slog.Logger

	current atomic.Pointer[verify.Verifier]

	mu       sync.Mutex // held while looking at the files
	checked  time.Time
	contents [][]byte
	lastErr  string
}

// secretFile is one file with the config key that names it, for messages.
type secretFile struct {
	path, key string
	scheme    string // for public keys: the scheme that must parse it
}

// providerFiles lists the secret files of p.
func providerFiles(i int, p config.Provider) []secretFile {
	var out []secretFile
	for j, path := range p.SecretsFile {
		out = append(out, secretFile{path: path, key: fmt.Sprintf("providers[%d].secrets_file[%d]", i, j)})
	}
	for j, path := range p.PublicKeysFile {
		out = append(out, secretFile{path: path, key: fmt.Sprintf("providers[%d].public_keys_file[%d]", i, j), scheme: p.Scheme})
	}
	return out
}

// newFileVerifier opens the files through res; any problem stops the
// start, naming the key.
func newFileVerifier(provider string, files []secretFile, fixed [][]byte, build func([][]byte) (verify.Verifier, error), res secretfile.Resolver) (*fileVerifier, error) {
	f := &fileVerifier{provider: provider, build: build, fixed: fixed, logger: cmp.Or(res.Logger, slog.New(slog.DiscardHandler))}
	for _, sf := range files {
		file, err := res.Open(sf.path, sf.key, func(b []byte) error { return verify.CheckPublicKey(sf.scheme, b) })
		if err != nil {
			return nil, err
		}
		f.files = append(f.files, file)
	}
	contents := f.values()
	v, err := build(append(append([][]byte(nil), fixed...), contents...))
	if err != nil {
		return nil, err
	}
	f.contents, f.checked = contents, time.Now()
	f.current.Store(&v)
	return f, nil
}

// values returns every file's current contents.
func (f *fileVerifier) values() [][]byte {
	out := make([][]byte, len(f.files))
	for i, file := range f.files {
		out[i] = file.Value()
	}
	return out
}

// Verify implements verify.Verifier with the current secrets.
func (f *fileVerifier) Verify(body []byte, h http.Header, now time.Time) (verify.Event, error) {
	f.refresh()
	return (*f.current.Load()).Verify(body, h, now)
}

// refresh rebuilds the verifier when a file's contents changed, looking at
// most every secretFileCheck. Only one request looks at a time; the others
// verify with what is current.
func (f *fileVerifier) refresh() {
	if !f.mu.TryLock() {
		return
	}
	defer f.mu.Unlock()
	now := time.Now()
	if now.Sub(f.checked) < secretFileCheck {
		return
	}
	f.checked = now
	contents := f.values()
	if equalSecrets(contents, f.contents) {
		return
	}
	v, err := f.build(append(append([][]byte(nil), f.fixed...), contents...))
	if err != nil {
		if err.Error() != f.lastErr {
			// Logged once per distinct problem, not once a second.
			f.lastErr = err.Error()
			f.logger.Warn("secret files not reloaded: verifying with the last good secrets",
				slog.String("provider", f.provider), slog.String("error", err.Error()))
		}
		return
	}
	f.contents = contents
	f.current.Store(&v)
	f.lastErr = ""
	f.logger.Info("secret files changed: verifying with the new secrets", slog.String("provider", f.provider))
}

func equalSecrets(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
