// Package secretfile reads secrets from files, as Kubernetes mounts a
// Secret, and again when they change, so that a rotation needs no restart.
package secretfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Check is how often, at most, a File is read again to see whether it
// changed. Kubernetes updates a mounted Secret within about a minute of the
// Secret's change; a second is far below that and costs one small read a
// second while the secret is in use.
const Check = time.Second

// MaxSize bounds a secret file: a PEM key is well under a kilobyte.
const MaxSize = 64 << 10

// Read reads a secret without its one trailing newline (what an editor or
// `echo` leaves), refusing an empty or oversized file. Its errors name the
// path, never the contents.
func Read(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, errors.Unwrap(err))
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxSize+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("cannot read %s", path)
	case len(b) > MaxSize:
		return nil, fmt.Errorf("file %s is larger than %d bytes", path, MaxSize)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("file %s is empty", path)
	}
	return b, nil
}

// Rules are what a File's contents must meet, at start and every time the
// file is read again, and who hears of a new value.
type Rules struct {
	// Check refuses contents that are no valid secret (too short, not of
	// the form the key needs); nil accepts any. Its error must name the
	// problem, never quote the contents.
	Check func([]byte) error
	// Changed is called with each new value accepted after start, before
	// it is used: a redactor adds it there. Nil for nobody.
	Changed func([]byte)
}

// File is one secret file, named in messages by the config key that names
// it. Value reads it again at most every Check; a file that cannot be read,
// is empty or fails its Rules then leaves the last good value in place, and
// is logged once per distinct problem, naming the key, never the value.
type File struct {
	path, key string
	logger    *slog.Logger
	rules     Rules

	mu      sync.Mutex
	checked time.Time
	value   []byte
	lastErr string
}

// Open reads the file once; a problem is an error naming key, for the
// binary to stop at start.
func Open(path, key string, logger *slog.Logger) (*File, error) {
	return OpenWith(path, key, logger, Rules{})
}

// OpenWith is Open with rules, which the contents must meet at start (or
// the error names key) and at every read after it.
func OpenWith(path, key string, logger *slog.Logger, rules Rules) (*File, error) {
	b, err := read(path, rules)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &File{path: path, key: key, logger: logger, rules: rules, checked: time.Now(), value: b}, nil
}

// read is Read, then rules' Check.
func read(path string, rules Rules) ([]byte, error) {
	b, err := Read(path)
	if err == nil && rules.Check != nil {
		if cerr := rules.Check(b); cerr != nil {
			return nil, fmt.Errorf("file %s %w", path, cerr)
		}
	}
	return b, err
}

// Value returns the secret as it is now. Callers must not modify it.
func (f *File) Value() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if now.Sub(f.checked) < Check {
		return f.value
	}
	f.checked = now
	b, err := read(f.path, f.rules)
	switch {
	case err != nil:
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			f.logger.Warn("secret file not reloaded: using the last good secret",
				slog.String("key", f.key), slog.String("error", msg))
		}
	case !bytes.Equal(b, f.value):
		if f.rules.Changed != nil {
			f.rules.Changed(b)
		}
		f.value, f.lastErr = b, ""
		f.logger.Info("secret file changed: using the new secret", slog.String("key", f.key))
	}
	return f.value
}
