package verify

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScopeFrom(t *testing.T) {
	t.Parallel()

	secret := "whsec_scope"
	header, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(secret)}, ScopeFrom: "header:Stripe-Account"})
	require.NoError(t, err)
	body, err := New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(secret)}, ScopeFrom: "json:account"})
	require.NoError(t, err)

	now := testNow()
	event := []byte(`{"id":"evt_1","type":"invoice.paid","account":"acct_A","data":{"object":{"id":"in_1"}}}`)
	signed := func(b []byte, kv ...string) http.Header {
		return with(stripeRequest(b, secret, now), kv...)
	}
	noAccount := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	colon := []byte(`{"id":"evt_1","type":"invoice.paid","account":"acct:A"}`)
	dup := []byte(`{"id":"evt_1","type":"invoice.paid","account":"acct_A","Account":"acct_B"}`)
	long := []byte(`{"id":"evt_` + strings.Repeat("x", 250) + `","type":"invoice.paid","account":"acct_A"}`)

	runVerifyCases(t, header, []verifyCase{
		{name: "header scope", body: event, header: signed(event, "Stripe-Account", "acct_B"), want: Event{ID: "acct_B:evt_1", Type: "invoice.paid", ObjectID: "in_1"}},
		{name: "header scope missing", body: event, header: signed(event), wantErr: ErrInvalid, reason: "missing_scope"},
		{name: "header scope with a colon", body: event, header: signed(event, "Stripe-Account", "a:b"), wantErr: ErrInvalid, reason: "malformed_scope"},
		{name: "bad signature first", body: event, header: with(stripeRequest(event, "whsec_other", now), "Stripe-Account", "acct_B"), wantErr: ErrUnauthorized, reason: "bad_signature"},
	}, secret)
	runVerifyCases(t, body, []verifyCase{
		{name: "body scope", body: event, header: signed(event), want: Event{ID: "acct_A:evt_1", Type: "invoice.paid", ObjectID: "in_1"}},
		{name: "body scope missing", body: noAccount, header: signed(noAccount), wantErr: ErrInvalid, reason: "missing_scope"},
		{name: "body scope with a colon", body: colon, header: signed(colon), wantErr: ErrInvalid, reason: "malformed_scope"},
		{name: "body scope twice", body: dup, header: signed(dup), wantErr: ErrInvalid, reason: "ambiguous_field"},
		{name: "scope and id too long together", body: long, header: signed(long), wantErr: ErrInvalid, reason: "malformed_id"},
	}, secret)

	_, err = New(Config{Scheme: "stripe", Secrets: [][]byte{[]byte(secret)}, ScopeFrom: "query:account"})
	require.EqualError(t, err, `scope_from "query:account" must be header:NAME or json:dotted.path`)
}

func TestScopeFromAdyenMerchantAccount(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: "adyen", Secrets: [][]byte{[]byte(adyenDocKey)},
		ScopeFrom: "json:notificationItems.0.NotificationRequestItem.merchantAccountCode"})
	require.NoError(t, err)
	ev, err := v.Verify(adyenBody(t, adyenDocItem()), http.Header{}, testNow())
	require.NoError(t, err)
	require.Equal(t, "merchantAccount:pspReference:EVENT", ev.ID)
}

// TestScopeFromHandsOnTheBodyItParsed: a scheme that reads nothing from
// the body (GitHub) with a json: scope parses the body once, for the scope,
// and hands that parse on to the routes, as the schemes that parse do.
func TestScopeFromHandsOnTheBodyItParsed(t *testing.T) {
	t.Parallel()
	v, err := New(Config{Scheme: "github", Secrets: [][]byte{[]byte(githubSecret)}, ScopeFrom: "json:installation.id"})
	require.NoError(t, err)
	body := []byte(`{"installation":{"id":"inst_7"},"ref":"refs/heads/main"}`)
	ev, err := v.Verify(body, githubRequest(body, githubSecret), testNow())
	require.NoError(t, err)
	require.Equal(t, "inst_7:"+githubDelivery, ev.ID)
	require.Equal(t, "refs/heads/main", ev.Body["ref"])
}
