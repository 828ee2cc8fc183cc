package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxSignatureEntries bounds how many entries of a signature header are
// looked at. Senders put one or two there (two while rotating a secret);
// the bound keeps the work per request at most this many HMAC comparisons
// per secret however long the header is.
const maxSignatureEntries = 16

// hmacSHA256 returns HMAC-SHA256 of the concatenation of parts under key,
// without building the concatenation (the body may be a megabyte).
// The keyed state of each secret's HMAC is kept for reuse (macs), so that a
// request costs its hashes, not the key's setup again.
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	pool, ok := macs.Load(string(key))
	if !ok {
		k := bytes.Clone(key)
		pool, _ = macs.LoadOrStore(string(k), &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }})
	}
	m := pool.(*sync.Pool).Get().(hash.Hash)
	m.Reset()
	for _, p := range parts {
		m.Write(p)
	}
	sum := m.Sum(make([]byte, 0, sha256.Size))
	pool.(*sync.Pool).Put(m)
	return sum
}

// macs holds, by key, a pool of HMAC-SHA256 states keyed with it. Every
// caller passes a configured secret (matchAny), so the map holds the
// configured secrets, plus those that each reload of secret files brings:
// it grows with the operator's changes, never with requests.
var macs sync.Map

// matchAny reports whether any candidate equals HMAC-SHA256 of content under
// any of secrets. Each comparison is constant-time and the loops never stop
// at a match, so the time taken depends only on how many secrets and
// candidates there are, not on which matched or how closely.
func matchAny(secrets, candidates [][]byte, content ...[]byte) bool {
	matched := false
	for _, secret := range secrets {
		expected := hmacSHA256(secret, content...)
		for _, c := range candidates {
			if hmac.Equal(expected, c) {
				matched = true
			}
		}
	}
	return matched
}

// decodeHexMAC decodes a hex HMAC-SHA256 signature; ok is false unless it is
// exactly sha256.Size bytes.
func decodeHexMAC(s string) (mac []byte, ok bool) {
	if len(s) != hex.EncodedLen(sha256.Size) {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// decodeBase64MAC decodes a standard, padded base64 HMAC-SHA256 signature.
// Decoding is strict and the length exact, so only the one canonical
// spelling of a signature is accepted (plain StdEncoding would also take
// other trailing bits, and line breaks), exactly like a string comparison
// with the canonical encoding.
func decodeBase64MAC(s string) (mac []byte, ok bool) {
	if len(s) != base64.StdEncoding.EncodedLen(sha256.Size) || strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return b, err == nil && len(b) == sha256.Size
}

// parseUnix parses unix seconds written in canonical decimal: digits only, no
// sign, no leading zero. The signed content holds the timestamp as sent, and
// the reference libraries sign its canonical form; refusing other spellings
// makes the two the same.
func parseUnix(s string) (time.Time, bool) {
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// checkTolerance rejects a signed timestamp more than tolerance before or
// after now. Too old bounds replays of a captured request; too new stops a
// request signed ahead of time from outliving the window.
func checkTolerance(ts, now time.Time, tolerance time.Duration) error {
	switch d := now.Sub(ts); {
	case d > tolerance:
		return unauthorized(reasonTimestampTolerance, fmt.Sprintf("signed timestamp is more than %s in the past", tolerance))
	case d < -tolerance:
		return unauthorized(reasonTimestampTolerance, fmt.Sprintf("signed timestamp is more than %s in the future", tolerance))
	}
	return nil
}
