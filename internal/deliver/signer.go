package deliver

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookgate/hookgate/internal/secretfile"
)

// signer signs what a route forwards with its Standard Webhooks secret,
// from signing_secret_env (fixed) or signing_secret_file (read again when
// it changes: a rotated secret signs from the next attempt on, with no
// restart).
type signer struct {
	key  string // the config key that names the secret, for messages
	file *secretfile.File

	mu     sync.Mutex
	secret []byte
	wh     *standardwebhooks.Webhook
}

// newSigner checks the secret now, so a bad one stops the worker at start.
func newSigner(key string, secret []byte, file *secretfile.File) (*signer, error) {
	s := &signer{key: key, file: file}
	if file != nil {
		secret = file.Value()
	}
	wh, err := webhookOf(key, secret)
	if err != nil {
		return nil, err
	}
	s.secret, s.wh = secret, wh
	return s, nil
}

// checkSigningSecret is the rule a signing_secret_file's contents meet, at
// start and when read again.
func checkSigningSecret(b []byte) error {
	if _, err := standardwebhooks.NewWebhook(string(b)); err != nil {
		return errors.New("does not hold a Standard Webhooks secret (whsec_ followed by base64)")
	}
	return nil
}

func webhookOf(key string, secret []byte) (*standardwebhooks.Webhook, error) {
	wh, err := standardwebhooks.NewWebhook(string(secret))
	if err != nil {
		return nil, fmt.Errorf("%s does not hold a Standard Webhooks secret (whsec_ followed by base64)", key)
	}
	return wh, nil
}

// Sign returns the signature of body under msgID at ts, with the file's
// current secret: contents that are no Standard Webhooks secret are refused
// by the file's rules (checkSigningSecret), which keep the last good one.
func (s *signer) Sign(msgID string, ts time.Time, body []byte) (string, error) {
	s.mu.Lock()
	if s.file != nil {
		if cur := s.file.Value(); !bytes.Equal(cur, s.secret) {
			wh, err := webhookOf(s.key, cur)
			if err != nil {
				s.mu.Unlock()
				return "", err
			}
			s.secret, s.wh = cur, wh
		}
	}
	wh := s.wh
	s.mu.Unlock()
	return wh.Sign(msgID, ts, body)
}
