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
	key    string // the config key that names the secret, for messages
	source *secretfile.Secret

	mu     sync.Mutex
	secret []byte
	wh     *standardwebhooks.Webhook
}

// newSigner signs with source, whose value the resolver checked at start
// (checkSigningSecret), so a bad one stopped the worker there.
func newSigner(key string, source *secretfile.Secret) (*signer, error) {
	secret := source.Value()
	wh, err := webhookOf(key, secret)
	if err != nil {
		return nil, err
	}
	return &signer{key: key, source: source, secret: secret, wh: wh}, nil
}

// checkSigningSecret is the rule a signing secret meets: from the
// environment at start, from a file at start and when read again.
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
	if cur := s.source.Value(); !bytes.Equal(cur, s.secret) {
		wh, err := webhookOf(s.key, cur)
		if err != nil {
			s.mu.Unlock()
			return "", err
		}
		s.secret, s.wh = cur, wh
	}
	wh := s.wh
	s.mu.Unlock()
	return wh.Sign(msgID, ts, body)
}
