package deliver

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/proctest"
)

const testSigningSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestRequest(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Routes: []config.Route{
		{Name: "ship", URL: "http://downstream.internal/hooks/ship", SigningSecretEnv: "SHIP_SECRET"},
		{Name: "mail", URL: "http://downstream.internal/hooks/mail"},
	}}
	w, err := NewWorker(Options{Config: cfg, SigningSecrets: map[string][]byte{"ship": []byte(testSigningSecret)}})
	require.NoError(t, err)
	payload := []byte("{\"id\":\"evt_1\",\n \"type\":\"invoice.paid\", \"amount\": 1e3}  \n")
	d := claim.Delivery{
		Provider: "stripe", EventID: "evt_1", Route: "ship", AttemptCount: 2,
		EventType: "invoice.paid", ContentType: "application/json; charset=utf-8", Payload: payload,
	}

	t.Run("CarriesTheContractHeadersAndTheBodyByteForByte", func(t *testing.T) {
		t.Parallel()
		r := w.runtimes["ship"]
		req, _, err := w.request(context.Background(), r, d, 3)
		require.NoError(t, err)
		require.Equal(t, http.MethodPost, req.Method)
		require.Equal(t, "http://downstream.internal/hooks/ship", req.URL.String())
		body, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		require.Equal(t, payload, body)
		require.Equal(t, int64(len(payload)), req.ContentLength)
		require.Nil(t, req.GetBody, "the transport cannot replay what it cannot rewind")
		require.Empty(t, req.Header.Values("Content-Encoding"))

		key := claim.Key{Provider: "stripe", EventID: "evt_1", Route: "ship"}.IdempotencyKey()
		for name, want := range map[string]string{
			"Content-Type":        "application/json; charset=utf-8",
			"User-Agent":          "hookgate",
			"Idempotency-Key":     key,
			"Hookgate-Provider":   "stripe",
			"Hookgate-Event-Id":   "evt_1",
			"Hookgate-Event-Type": "invoice.paid",
			"Hookgate-Route":      "ship",
			"Hookgate-Attempt":    "3", // the number it is given
			"Webhook-Id":          key,
		} {
			require.Equal(t, want, req.Header.Get(name), name)
		}
	})

	t.Run("SignatureVerifiesWithTheOfficialLibrary", func(t *testing.T) {
		t.Parallel()
		r := w.runtimes["ship"]
		req, _, err := w.request(context.Background(), r, d, 3)
		require.NoError(t, err)
		ts, err := strconv.ParseInt(req.Header.Get("webhook-timestamp"), 10, 64)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), time.Unix(ts, 0), 5*time.Second)

		wh, err := standardwebhooks.NewWebhook(testSigningSecret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(payload, req.Header))

		require.Error(t, wh.Verify(append([]byte(nil), append(payload, ' ')...), req.Header), "a changed body must not verify")
		other, err := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString([]byte("another key, 32 bytes long......")))
		require.NoError(t, err)
		require.Error(t, other.Verify(payload, req.Header), "another secret must not verify")
	})

	t.Run("UnsignedRouteSendsNoSignature", func(t *testing.T) {
		t.Parallel()
		r := w.runtimes["mail"]
		md := d
		md.Route, md.ContentType = "mail", ""
		req, _, err := w.request(context.Background(), r, md, 1)
		require.NoError(t, err)
		for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "Content-Type"} {
			require.Empty(t, req.Header.Values(h), h)
		}
		require.Equal(t, claim.Key{Provider: "stripe", EventID: "evt_1", Route: "mail"}.IdempotencyKey(), req.Header.Get("Idempotency-Key"))
	})

	t.Run("ContentEncodingIsForwardedAsReceived", func(t *testing.T) {
		t.Parallel()
		r := w.runtimes["mail"]
		md := d
		md.Route, md.ContentEncoding = "mail", "gzip"
		req, _, err := w.request(context.Background(), r, md, 1)
		require.NoError(t, err)
		require.Equal(t, []string{"gzip"}, req.Header.Values("Content-Encoding"))
		body, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		require.Equal(t, payload, body, "never decoded")
	})

	t.Run("ControlCharactersInTheEventTypeCannotBreakTheRequest", func(t *testing.T) {
		t.Parallel()
		r := w.runtimes["mail"]
		md := d
		md.Route, md.EventType = "mail", "invoice.paid\r\nX-Injected: 1"
		req, _, err := w.request(context.Background(), r, md, 1)
		require.NoError(t, err)
		require.Equal(t, "invoice.paid  X-Injected: 1", req.Header.Get("Hookgate-Event-Type"))
		require.Empty(t, req.Header.Get("X-Injected"))
	})

	t.Run("BadSigningSecretIsReportedWithoutItsValue", func(t *testing.T) {
		t.Parallel()
		_, err := NewWorker(Options{Config: cfg, SigningSecrets: map[string][]byte{"ship": []byte("whsec_not base64!")}})
		require.ErrorContains(t, err, "routes[0].signing_secret_env: SHIP_SECRET does not hold a Standard Webhooks secret")
		require.NotContains(t, err.Error(), "not base64!")
	})
}

func TestShapedRequest(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Routes: []config.Route{{
		Name: "create-shipment", URL: "https://api.shipper.example/v1/shipments", SigningSecretEnv: "SHIP_SECRET",
		Method: http.MethodPut, IdempotencyHeader: "X-Idempotency-Key",
		Headers:       map[string]string{"Accept": "application/json"},
		SecretHeaders: map[string]string{"Authorization": "SHIPPER_AUTHORIZATION"},
		Body:          `{order: .data.object.metadata.order_id, event: $event.id, key: $event.idempotency_key}`,
	}, {
		Name: "broken", URL: "https://api.shipper.example/v1/shipments", Timeout: config.Duration(time.Minute),
		Body: `.data.object.metadata.order_id | ascii_downcase`,
	}}}
	w, err := NewWorker(Options{
		Config:         cfg,
		SigningSecrets: map[string][]byte{"create-shipment": []byte(testSigningSecret)},
		SecretHeaders:  map[string]map[string]string{"create-shipment": {"Authorization": "Bearer sk_live_1"}},
	})
	require.NoError(t, err)
	payload := []byte(`{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"metadata":{"order_id":42}}}}`)
	d := claim.Delivery{
		Provider: "stripe", EventID: "evt_1", Route: "create-shipment", EventType: "checkout.session.completed",
		ContentType: "application/json; charset=utf-8", Payload: payload,
	}
	key := d.Key().IdempotencyKey()
	r := w.runtimes["create-shipment"]

	req, _, err := w.request(context.Background(), r, d, 1)
	require.NoError(t, err)
	require.Equal(t, http.MethodPut, req.Method)
	body, err := io.ReadAll(req.Body)
	require.NoError(t, err)
	require.Equal(t, `{"event":"evt_1","key":"`+key+`","order":42}`, string(body))
	require.Equal(t, int64(len(body)), req.ContentLength)
	require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	require.Equal(t, "application/json", req.Header.Get("Accept"))
	require.Equal(t, "Bearer sk_live_1", req.Header.Get("Authorization"))
	require.Equal(t, key, req.Header.Get("X-Idempotency-Key"))
	require.Empty(t, req.Header.Values("Idempotency-Key"), "the key goes in the route's header only")
	require.Equal(t, "create-shipment", req.Header.Get("Hookgate-Route"))

	wh, err := standardwebhooks.NewWebhook(testSigningSecret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(body, req.Header), "the signature covers the bytes sent")
	require.Error(t, wh.Verify(payload, req.Header), "not the provider's")

	again, _, err := w.request(context.Background(), r, d, 2)
	require.NoError(t, err)
	againBody, err := io.ReadAll(again.Body)
	require.NoError(t, err)
	require.Equal(t, body, againBody, "the same bytes on every attempt")

	gz := d
	gz.ContentEncoding = "gzip"
	req, _, err = w.request(context.Background(), r, gz, 1)
	require.NoError(t, err)
	require.Empty(t, req.Header.Values("Content-Encoding"), "a shaped body is hookgate's own JSON, not the provider's encoding")

	broken := w.runtimes["broken"]
	bd := d
	bd.Route = "broken"
	o := w.call(context.Background(), broken, bd, 1)
	require.Equal(t, rejected, o.verdict, "a program that fails fails for good: no attempt would do better")
	require.Equal(t, "route program failed: routes[1].body: ascii_downcase cannot be applied to: number", o.reason)
}

func TestRouteClientTLSFiles(t *testing.T) {
	t.Parallel()
	missing := t.TempDir() + "/missing.pem"
	notPEM := t.TempDir() + "/ca.pem"
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	for _, tt := range []struct {
		tls  config.TLS
		want string
	}{
		{config.TLS{CAFile: missing}, "routes[0].tls.ca_file: open " + missing + ": no such file or directory"},
		{config.TLS{CAFile: notPEM}, "routes[0].tls.ca_file: " + notPEM + " holds no PEM certificate"},
		{config.TLS{CertFile: missing, KeyFile: notPEM}, "routes[0].tls.cert_file: open " + missing + ": no such file or directory"},
		{config.TLS{CertFile: notPEM, KeyFile: missing}, "routes[0].tls.key_file: open " + missing + ": no such file or directory"},
		{config.TLS{CertFile: notPEM, KeyFile: notPEM}, "routes[0].tls.cert_file, routes[0].tls.key_file: not a certificate and its key: tls: failed to find any PEM data in certificate input"},
	} {
		cfg := &config.Config{Routes: []config.Route{{Name: "bank", URL: "https://bank.example/pay", TLS: tt.tls}}}
		_, err := NewWorker(Options{Config: cfg})
		require.EqualError(t, err, tt.want)
	}
}

// TestSigningSecretFileRotates: a route's signing_secret_file is read at
// start and again when it changes, so the attempts after a rotation are
// signed with the new secret (and no longer with the old) without a
// restart; the new secret is redacted at once; and contents that hold no
// secret are refused as at start, the last good secret kept.
func TestSigningSecretFileRotates(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/signing-secret"
	require.NoError(t, os.WriteFile(path, []byte(testSigningSecret+"\n"), 0o600))
	cfg := &config.Config{Routes: []config.Route{
		{Name: "ship", URL: "http://downstream.internal/hooks/ship", SigningSecretFile: path},
	}}
	logs := &proctest.Buffer{}
	w, err := NewWorker(Options{Config: cfg, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	require.NoError(t, err)
	r := w.runtimes["ship"]
	payload := []byte(`{"id":"evt_1"}`)
	d := claim.Delivery{Provider: "stripe", EventID: "evt_1", Route: "ship", EventType: "t", Payload: payload}
	sign := func() (http.Header, error) {
		req, _, err := w.request(context.Background(), r, d, 1)
		if err != nil {
			return nil, err
		}
		return req.Header, nil
	}
	oldWH, err := standardwebhooks.NewWebhook(testSigningSecret)
	require.NoError(t, err)
	newSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the rotated key, 32 bytes long.."))
	newWH, err := standardwebhooks.NewWebhook(newSecret)
	require.NoError(t, err)

	h, err := sign()
	require.NoError(t, err)
	require.NoError(t, oldWH.Verify(payload, h), "signed with the file's secret at start")

	require.NoError(t, os.WriteFile(path, []byte(newSecret), 0o600))
	require.Eventually(t, func() bool {
		h, err := sign()
		return err == nil && newWH.Verify(payload, h) == nil
	}, 30*time.Second, 50*time.Millisecond, "the rotated secret is never used")
	h, err = sign()
	require.NoError(t, err)
	require.Error(t, oldWH.Verify(payload, h), "the old secret signs nothing after the rotation")

	// Contents refused at start are refused when read again: the last good
	// secret signs on, and the log names the key, never the contents.
	require.NoError(t, os.WriteFile(path, []byte("whsec_not base64!"), 0o600))
	require.Eventually(t, func() bool {
		_, _ = sign() // each attempt may read the file again
		return strings.Contains(logs.String(), "secret file not reloaded")
	}, 30*time.Second, 50*time.Millisecond, "the refused contents are never logged as refused")
	require.Contains(t, logs.String(), `"key":"routes[0].signing_secret_file"`)
	require.Contains(t, logs.String(), "does not hold a Standard Webhooks secret")
	require.NotContains(t, logs.String(), "not base64!")
	h, err = sign()
	require.NoError(t, err)
	require.NoError(t, newWH.Verify(payload, h), "the last good secret still signs")
	require.Equal(t, "sig [redacted]", w.redact.String("sig "+newSecret), "the rotated secret joined the redactor")

	_, err = NewWorker(Options{Config: &config.Config{Routes: []config.Route{
		{Name: "ship", URL: "http://downstream.internal/hooks/ship", SigningSecretFile: path + ".missing"},
	}}})
	require.ErrorContains(t, err, "routes[0].signing_secret_file: cannot read "+path+".missing")
}
