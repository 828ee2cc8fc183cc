package verify

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	shopifySecret        = "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"
	shopifySecretRotated = "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"
	shopifySecretOther   = "shpss_00000000000000000000000000000000"
	shopifyEventID       = "8a6ab5e6-8fc1-4c3a-9b6e-1bf0d5a2f3c4"
	shopifyWebhookID     = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
)

// shopifyRequest returns the headers Shopify sends for body signed with
// secret; kv overrides them, an empty value deleting the header.
func shopifyRequest(body []byte, secret string, kv ...string) http.Header {
	h := headers(
		shopifySignatureHeader, macBase64(secret, string(body)),
		shopifyEventIDHeader, shopifyEventID,
		shopifyWebhookIDHeader, shopifyWebhookID,
		shopifyTopicHeader, "orders/create",
		"X-Shopify-Shop-Domain", "example.myshopify.com",
		"X-Shopify-Api-Version", "2024-07",
		"X-Shopify-Triggered-At", "2024-07-16T18:03:31.915883256Z",
	)
	return with(h, kv...)
}

func TestShopify(t *testing.T) {
	t.Parallel()

	v, err := New(Config{Scheme: "shopify", Secrets: [][]byte{[]byte(shopifySecret), []byte(shopifySecretRotated)}})
	require.NoError(t, err)

	body := readTestdata(t, "shopify_orders_create.json")
	// 820982911946154508 is above 2^53: a float64 would round it.
	want := Event{ID: shopifyEventID, Type: "orders/create", ObjectID: "820982911946154508"}
	good := macBase64(shopifySecret, string(body))
	raw, err := base64.StdEncoding.DecodeString(good)
	require.NoError(t, err)
	stringID := []byte(`{"id":"gid://shopify/Product/1","title":"Caf\u00e9"}`)
	noID := []byte(`{"title":"Caf\u00e9"}`)
	notJSON := []byte(`not json`)

	cases := []verifyCase{
		{name: "valid", body: body, header: shopifyRequest(body, shopifySecret), want: want},
		{name: "rotated second secret", body: body, header: shopifyRequest(body, shopifySecretRotated), want: want},
		{name: "webhook id when event id is absent", body: body, header: shopifyRequest(body, shopifySecret, shopifyEventIDHeader, ""), want: Event{ID: shopifyWebhookID, Type: "orders/create", ObjectID: "820982911946154508"}},
		{name: "string object id", body: stringID, header: shopifyRequest(stringID, shopifySecret, shopifyTopicHeader, "products/update"), want: Event{ID: shopifyEventID, Type: "products/update", ObjectID: "gid://shopify/Product/1"}},
		{name: "no object id", body: noID, header: shopifyRequest(noID, shopifySecret), want: Event{ID: shopifyEventID, Type: "orders/create"}},
		{name: "body not JSON leaves object id empty", body: notJSON, header: shopifyRequest(notJSON, shopifySecret), want: Event{ID: shopifyEventID, Type: "orders/create"}},

		{name: "wrong secret", body: body, header: shopifyRequest(body, shopifySecretOther), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "missing header", body: body, header: shopifyRequest(body, shopifySecret, shopifySignatureHeader, ""), wantErr: ErrUnauthorized, reason: "missing_signature"},
		{name: "not base64", body: body, header: shopifyRequest(body, shopifySecret, shopifySignatureHeader, strings.Repeat("*", 44)), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "hex instead of base64", body: body, header: shopifyRequest(body, shopifySecret, shopifySignatureHeader, macHex(shopifySecret, string(body))), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "unpadded", body: body, header: shopifyRequest(body, shopifySecret, shopifySignatureHeader, strings.TrimRight(good, "=")), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "raw bytes", body: body, header: shopifyRequest(body, shopifySecret, shopifySignatureHeader, string(raw)), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "line break inside", body: body, header: shopifyRequest(body, shopifySecret, shopifySignatureHeader, good[:20]+"\n"+good[20:43]), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "sha256= prefix", body: body, header: shopifyRequest(body, shopifySecret, shopifySignatureHeader, "sha256="+good), wantErr: ErrUnauthorized, reason: "malformed_signature"},
		{name: "re-serialized body", body: reserialized(t, body), header: shopifyRequest(body, shopifySecret), wantErr: ErrUnauthorized, reason: "bad_signature"},
		{name: "one byte changed", body: flipByte(body, 7), header: shopifyRequest(body, shopifySecret), wantErr: ErrUnauthorized, reason: "bad_signature"},

		{name: "no id header", body: body, header: shopifyRequest(body, shopifySecret, shopifyEventIDHeader, "", shopifyWebhookIDHeader, ""), wantErr: ErrInvalid, reason: "missing_id"},
		{name: "malformed event id does not fall back", body: body, header: shopifyRequest(body, shopifySecret, shopifyEventIDHeader, "two words"), wantErr: ErrInvalid, reason: "malformed_id"},
		{name: "topic missing", body: body, header: shopifyRequest(body, shopifySecret, shopifyTopicHeader, ""), wantErr: ErrInvalid, reason: "missing_type"},
	}
	runVerifyCases(t, v, cases, shopifySecret, shopifySecretRotated)
}
