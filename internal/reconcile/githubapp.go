package reconcile

import (
	"crypto/rsa"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hookgate/hookgate/internal/secretfile"
)

// appSigner authenticates as a GitHub App, which is how the App's own
// webhook's deliveries are listed and redelivered: an RS256 JWT whose
// issuer is the App's id, signed with its private key, valid for at most
// ten minutes (GitHub's limit). A token is made for a few minutes and
// reused; the key file is read again as it rotates.
type appSigner struct {
	appID int64
	key   *secretfile.Secret
	now   func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
	// pem is the key the token was signed with, to notice a rotation.
	pem string
}

// appTokenLife is how long a token is made for; it is renewed a minute
// before it ends. iat is set a minute back, for clock drift, as GitHub
// advises.
const appTokenLife = 8 * time.Minute

// newAppSigner opens the App's private key (PEM, RSA).
func newAppSigner(o Options, key, path string, appID int64) (*appSigner, error) {
	secret, err := o.Resolver.File(path, key, func(b []byte) error {
		if _, err := jwt.ParseRSAPrivateKeyFromPEM(b); err != nil {
			return fmt.Errorf("is not an RSA private key in PEM form")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &appSigner{appID: appID, key: secret, now: time.Now}, nil
}

// secret is the private key, to keep out of errors.
func (a *appSigner) secret() string { return string(a.key.Value()) }

// authorize sets the App's JWT on req.
func (a *appSigner) authorize(req *http.Request) error {
	token, err := a.jwt()
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return nil
}

// jwt returns a token valid for a minute at least.
func (a *appSigner) jwt() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	pem := a.secret()
	if a.token != "" && pem == a.pem && now.Before(a.expires.Add(-time.Minute)) {
		return a.token, nil
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(pem))
	if err != nil {
		return "", fmt.Errorf("reading the GitHub App's private key: it is not an RSA private key in PEM form")
	}
	token, err := signApp(key, a.appID, now)
	if err != nil {
		return "", err
	}
	a.token, a.expires, a.pem = token, now.Add(appTokenLife), pem
	return token, nil
}

// signApp makes the App's JWT at now.
func signApp(key *rsa.PrivateKey, appID int64, now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(appID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(appTokenLife)),
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("signing the GitHub App's token: %w", err)
	}
	return token, nil
}
