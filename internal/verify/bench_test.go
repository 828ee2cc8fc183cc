package verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkVerify measures what verifying one request costs per scheme,
// beside Stripe's in the same run: every scheme verifies a signed request
// with a body of about 2 KiB, the schemes taking turns so that the
// machine's noise falls on all of them alike. It reports ns per request for
// each and its ratio to Stripe's. The rounds are its own
// (BENCH_VERIFY_ROUNDS, default 20000), so `-benchtime 1x`, as make bench
// runs it, still measures many requests.
func BenchmarkVerify(b *testing.B) {
	rounds := 20000
	if s := os.Getenv("BENCH_VERIFY_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(b, err)
		rounds = n
	}
	now := testNow()
	pad := strings.Repeat("x", 2000)
	event := func(fields string) []byte { return []byte(`{` + fields + `,"pad":"` + pad + `"}`) }

	type scheme struct {
		name string
		v    Verifier
		body []byte
		h    http.Header
		took time.Duration
	}
	var schemes []*scheme
	add := func(name string, c Config, body []byte, h http.Header) {
		v, err := New(c)
		require.NoError(b, err, name)
		_, err = v.Verify(body, h, now)
		require.NoError(b, err, name)
		schemes = append(schemes, &scheme{name: name, v: v, body: body, h: h})
	}

	secret := []byte("bench-secret-0123456789abcdef")
	stripeBody := event(`"id":"evt_1","type":"invoice.paid"`)
	add("stripe", Config{Scheme: "stripe", Secrets: [][]byte{secret}}, stripeBody, stripeRequest(stripeBody, string(secret), now))
	paddleBody := event(`"event_id":"evt_1","event_type":"transaction.completed"`)
	add("paddle", Config{Scheme: "paddle", Secrets: [][]byte{secret}}, paddleBody, headers(paddleSignatureHeader, paddleHeader(string(secret), now, paddleBody)))
	squareBody := event(`"event_id":"e1","type":"payment.updated"`)
	add("square", Config{Scheme: "square", Secrets: [][]byte{secret}, NotificationURL: squareDocURL}, squareBody,
		headers(squareSignatureHeader, macBase64(string(secret), squareDocURL, string(squareBody))))
	easyBody := event(`"id":"evt_1","description":"tracker.updated"`)
	add("easypost", Config{Scheme: "easypost", Secrets: [][]byte{secret}}, easyBody,
		headers(easyPostSignatureHeader, easyPostPrefix+macHex(string(secret), string(easyBody))))
	item := adyenDocItem()
	item["reason"] = pad
	add("adyen", Config{Scheme: "adyen", Secrets: [][]byte{[]byte(adyenDocKey)}}, adyenBody(b, item), http.Header{})
	pki := newPayPalPKI(b, now.Add(-time.Hour), now.Add(time.Hour))
	paypalBody := event(`"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED"`)
	add("paypal", pki.config(), paypalBody, pki.sign(b, "tid-1", now, paypalBody))
	edBody := event(`"id":"1","type":"2"`)
	add("ed25519", discordConfig(discordPublicKeyHex), edBody, discordSign(now, edBody))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(b, err)
	der, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(b, err)
	ecBody := event(`"sg_event_id":"sg1","event":"delivered"`)
	ts := fmt.Sprint(now.Unix())
	d := sha256.Sum256(append([]byte(ts), ecBody...))
	sig, err := ecdsa.SignASN1(rand.Reader, ec, d[:])
	require.NoError(b, err)
	add("ecdsa", Config{Scheme: "ecdsa", Secrets: [][]byte{[]byte(base64.StdEncoding.EncodeToString(der))},
		Header: sendGridSigHeader, TimestampHeader: sendGridTimeHeader, IDFrom: "json:sg_event_id", TypeFrom: "json:event"},
		ecBody, headers(sendGridSigHeader, base64.StdEncoding.EncodeToString(sig), sendGridTimeHeader, ts))

	b.ResetTimer()
	for range b.N {
		for range rounds {
			for _, s := range schemes {
				start := time.Now()
				if _, err := s.v.Verify(s.body, s.h, now); err != nil {
					b.Fatal(s.name, err)
				}
				s.took += time.Since(start)
			}
		}
	}
	b.StopTimer()
	per := func(s *scheme) float64 { return float64(s.took.Nanoseconds()) / float64(rounds*b.N) }
	base := per(schemes[0])
	for _, s := range schemes {
		b.ReportMetric(per(s), s.name+"_ns/req")
		if s != schemes[0] {
			b.ReportMetric(per(s)/base, s.name+"/stripe")
		}
	}
}
