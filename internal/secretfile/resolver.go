package secretfile

import (
	"fmt"
	"log/slog"
)

// Resolver opens the secrets a configuration names, every one under the
// same rules whoever uses it (ingest's verifiers, the worker's signers,
// the console's users and tokens):
//
//   - at start, a value that is missing, empty or fails its check stops
//     the binary, the error naming the key, never the value;
//   - a file is read again at most every Check as it rotates; contents that
//     cannot be read, are empty or fail the same check leave the last good
//     value in place, logged once per problem (see File);
//   - each new value is handed to Redact before it is used, so that no log
//     line or stored error quotes it.
//
// A secret from the environment is fixed at start (Env); the values at
// start are already the boot redactor's.
type Resolver struct {
	// Logger hears of rotations and of files not reloaded; nil discards.
	Logger *slog.Logger
	// Redact hears each value read after start, before it is used (a
	// sanitize.Redactor's Add); nil for nobody.
	Redact func(values ...string)
}

// Open opens the file at path that key names, its contents held to check
// at start and at every read after it (nil accepts any).
func (r Resolver) Open(path, key string, check func([]byte) error) (*File, error) {
	rules := Rules{Check: check}
	if r.Redact != nil {
		rules.Changed = func(b []byte) { r.Redact(string(b)) }
	}
	return OpenWith(path, key, r.Logger, rules)
}

// Secret is one configured secret: an environment variable's value, fixed
// at start, or a file's, read again as it rotates.
type Secret struct {
	fixed []byte
	file  *File
}

// Value returns the secret as it is now. Callers must not modify it.
func (s *Secret) Value() []byte {
	if s.file != nil {
		return s.file.Value()
	}
	return s.fixed
}

// Env returns the secret value read from the environment variable env,
// for key, held to check now: a value check refuses is an error naming
// the key and the variable, never the value.
func (r Resolver) Env(key, env string, value []byte, check func([]byte) error) (*Secret, error) {
	if len(value) == 0 {
		return nil, fmt.Errorf("%s: environment variable %s is not set or empty", key, env)
	}
	if check != nil {
		if err := check(value); err != nil {
			return nil, fmt.Errorf("%s: %s %w", key, env, err)
		}
	}
	return &Secret{fixed: value}, nil
}

// File returns the secret in the file at path, for key (see Open).
func (r Resolver) File(path, key string, check func([]byte) error) (*Secret, error) {
	f, err := r.Open(path, key, check)
	if err != nil {
		return nil, err
	}
	return &Secret{file: f}, nil
}
