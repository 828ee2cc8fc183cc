package route

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/idemkey"
)

const routesYAML = `
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [STRIPE_WEBHOOK_SECRET]
routes:
  - name: create-shipment
    provider: stripe
    events: ["checkout.session.completed"]
    filter: '.data.object.metadata.ship == "true"'
    url: https://api.shipper.example/v1/shipments
    headers: { Accept: application/json }
    secret_headers: { Authorization: SHIPPER_AUTHORIZATION }
    idempotency_header: X-Idempotency-Key
    body: '{order: .data.object.metadata.order_id, amount: .data.object.amount_total, key: $event.idempotency_key}'
    result: .id
  - name: notify
    provider: stripe
    events: ["checkout.*"]
    url: https://n8n.internal/webhook/paid
  - name: broken-filter
    provider: stripe
    events: ["*"]
    filter: '.data.object.amount_total | ascii_downcase'
    url: https://n8n.internal/webhook/x
  - name: other-provider
    provider: stripe
    events: ["invoice.paid"]
    url: https://n8n.internal/webhook/y
`

func setup(t *testing.T, yaml string) *Table {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	require.NoError(t, err)
	tab, err := New(cfg, map[string]map[string]string{"create-shipment": {"Authorization": "Bearer sk_test"}})
	require.NoError(t, err)
	return tab
}

var checkout = Event{Provider: "stripe", ID: "evt_1", Type: "checkout.session.completed"}

func payload(ship string) []byte {
	return []byte(`{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"amount_total":1234,
		"metadata":{"ship":"` + ship + `","order_id":"ord_9"}}}}`)
}

func TestMatch(t *testing.T) {
	t.Parallel()
	tab := setup(t, routesYAML)
	ctx := context.Background()

	t.Run("FilterTrueMatches", func(t *testing.T) {
		t.Parallel()
		matched, unmatched := matchNames(tab, ctx, checkout, payload("true"))
		require.Equal(t, []string{"create-shipment", "notify"}, matched)
		require.Len(t, unmatched, 1)
		require.Equal(t, "broken-filter", unmatched[0].Route)
		require.EqualError(t, unmatched[0].Err, "routes[2].filter: ascii_downcase cannot be applied to: number")
	})

	t.Run("FilterFalseDoesNotMatchAndSiblingsStillDo", func(t *testing.T) {
		t.Parallel()
		matched, unmatched := matchNames(tab, ctx, checkout, payload("false"))
		require.Equal(t, []string{"notify"}, matched)
		require.Equal(t, []Unmatched{{Route: "create-shipment"}, unmatched[1]}, unmatched)
	})

	t.Run("BodyThatIsNotJSONMatchesNoFilter", func(t *testing.T) {
		t.Parallel()
		matched, unmatched := matchNames(tab, ctx, checkout, []byte("ship=true"))
		require.Equal(t, []string{"notify"}, matched)
		require.Len(t, unmatched, 2)
		require.ErrorContains(t, unmatched[0].Err, "the event body is not JSON")
	})

	t.Run("TypePatternsComeFirst", func(t *testing.T) {
		t.Parallel()
		matched, unmatched := matchNames(tab, ctx, Event{Provider: "stripe", ID: "evt_2", Type: "invoice.paid"}, []byte("not json"))
		require.Equal(t, []string{"other-provider"}, matched)
		require.Len(t, unmatched, 1, "only the filter of a route whose type matched runs")
	})

	t.Run("OnlyTrueIsTrue", func(t *testing.T) {
		t.Parallel()
		for _, filter := range []string{`"true"`, `1`, `empty`, `[true]`, `null`, `false, true`} {
			tab := setup(t, strings.Replace(routesYAML, `'.data.object.metadata.ship == "true"'`, "'"+filter+"'", 1))
			matched, _ := matchNames(tab, ctx, checkout, payload("true"))
			require.NotContains(t, matched, "create-shipment", filter)
		}
		tab := setup(t, strings.Replace(routesYAML, `'.data.object.metadata.ship == "true"'`, "'true, false'", 1))
		matched, _ := matchNames(tab, ctx, checkout, payload("true"))
		require.Contains(t, matched, "create-shipment", "the first value decides")
	})
}

func TestBody(t *testing.T) {
	t.Parallel()
	tab := setup(t, routesYAML)
	ship, _ := tab.Route("create-shipment")
	ctx := context.Background()

	t.Run("ShapesOneJSONValueTheSameEveryTime", func(t *testing.T) {
		t.Parallel()
		body, ct, err := ship.Body(ctx, checkout, payload("true"), "text/plain")
		require.NoError(t, err)
		require.Equal(t, "application/json", ct)
		want := `{"amount":1234,"key":"` + idemkey.Of("stripe", "evt_1", "create-shipment") + `","order":"ord_9"}`
		require.Equal(t, want, string(body))
		for range 20 {
			again, _, err := ship.Body(ctx, checkout, payload("true"), "text/plain")
			require.NoError(t, err)
			require.Equal(t, body, again)
		}
	})

	t.Run("LargeIntegersKeepEveryDigit", func(t *testing.T) {
		t.Parallel()
		tab := setup(t, strings.Replace(routesYAML, "body: '{order:", "body: '{id: .data.object.order_number, order:", 1))
		r, _ := tab.Route("create-shipment")
		body, _, err := r.Body(ctx, checkout, []byte(`{"data":{"object":{"order_number":820982911946154508}}}`), "")
		require.NoError(t, err)
		require.Contains(t, string(body), `"id":820982911946154508`)
	})

	t.Run("UnshapedRouteSendsThePayloadAsIs", func(t *testing.T) {
		t.Parallel()
		notify, _ := tab.Route("notify")
		body, ct, err := notify.Body(ctx, checkout, []byte("raw bytes"), "text/plain")
		require.NoError(t, err)
		require.Equal(t, "raw bytes", string(body))
		require.Equal(t, "text/plain", ct)
	})

	for _, tt := range []struct{ name, program, input, want string }{
		{"RunTimeError", `.data.object.amount_total | ascii_downcase`, string(payload("true")),
			"route program failed: routes[0].body: ascii_downcase cannot be applied to: number"},
		{"NoValue", `empty`, `{}`, "route program failed: routes[0].body: the program yielded no value; it must yield one"},
		{"TwoValues", `1, 2`, `{}`, "route program failed: routes[0].body: the program yielded more than one value; it must yield one"},
		{"NotJSON", `.`, `ship=true`, "route program failed: routes[0].body: the event body is not JSON"},
		{"RunsTooLong", `last(range(1e15))`, `{}`, "route program failed: routes[0].body: took longer than 1s"},
		{"ReadsTheClock", `{at: now}`, `{}`, "route program failed: routes[0].body: error: now is not allowed here: the body must be the same on every attempt"},
		{"TooLarge", `"x" * 1100000`, `{}`, "route program failed: routes[0].body: the value is 1100002 bytes of JSON, over the 1048576 allowed"},
		{"ErrorTextIsBounded", `error("` + strings.Repeat("x", 1000) + `\n")`, `{}`, "route program failed: routes[0].body: error: " + strings.Repeat("x", 290) + "…"},
		{"ComputedErrorIsNotQuoted", `error("card " + .card)`, `{"card":"4242424242424242"}`,
			"route program failed: routes[0].body: error raised with a string (not quoted: it may hold body text)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tab := setup(t, strings.Replace(routesYAML,
				`body: '{order: .data.object.metadata.order_id, amount: .data.object.amount_total, key: $event.idempotency_key}'`,
				"body: '"+strings.ReplaceAll(tt.program, "'", "''")+"'", 1))
			r, _ := tab.Route("create-shipment")
			_, _, err := r.Body(ctx, checkout, []byte(tt.input), "")
			require.ErrorIs(t, err, ErrProgram)
			require.EqualError(t, err, tt.want)
		})
	}

	t.Run("CancelledIsNotTheProgramsFault", func(t *testing.T) {
		t.Parallel()
		tab := setup(t, strings.Replace(routesYAML,
			`body: '{order: .data.object.metadata.order_id, amount: .data.object.amount_total, key: $event.idempotency_key}'`,
			`body: '[range(1e15)] | length'`, 1))
		r, _ := tab.Route("create-shipment")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, _, err := r.Body(cctx, checkout, []byte(`{}`), "")
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, ErrProgram)
	})
}

func TestResult(t *testing.T) {
	t.Parallel()
	tab := setup(t, routesYAML)
	ship, _ := tab.Route("create-shipment")
	ctx := context.Background()

	got, err := ship.Result(ctx, checkout, []byte(`{"id":"shp_123","status":"created"}`))
	require.NoError(t, err)
	require.Equal(t, `"shp_123"`, string(got))

	got, err = ship.Result(ctx, checkout, []byte(`[]`))
	require.EqualError(t, err, "routes[0].result: expected an object but got: array")
	require.Nil(t, got)

	_, err = ship.Result(ctx, checkout, []byte(`<html>`))
	require.EqualError(t, err, "routes[0].result: the response is not JSON")

	_, err = ship.Result(ctx, checkout, []byte(`{"id":"`+strings.Repeat("x", 1100)+`"}`))
	require.EqualError(t, err, "routes[0].result: the value is 1102 bytes of JSON, over the 1024 allowed")

	notify, _ := tab.Route("notify")
	got, err = notify.Result(ctx, checkout, []byte(`{"id":"x"}`))
	require.NoError(t, err)
	require.Nil(t, got, "no result program, no result")
}

func TestHeader(t *testing.T) {
	t.Parallel()
	tab := setup(t, routesYAML)
	ship, _ := tab.Route("create-shipment")
	require.Equal(t, "application/json", ship.Header().Get("Accept"))
	require.Equal(t, "Bearer sk_test", ship.Header().Get("Authorization"))

	cfg, err := config.Parse([]byte(routesYAML))
	require.NoError(t, err)
	_, err = New(cfg, nil)
	require.EqualError(t, err, "routes[0].secret_headers.Authorization: environment variable SHIPPER_AUTHORIZATION was not read")
}

// A program must not read the worker's environment, where secrets live.
// Not parallel: it sets a variable.
func TestBodySeesNoEnvironment(t *testing.T) {
	ctx := context.Background()
	t.Setenv("HOOKGATE_ROUTE_TEST_SECRET", "TOPSECRET")
	tab := setup(t, strings.Replace(routesYAML,
		`body: '{order: .data.object.metadata.order_id, amount: .data.object.amount_total, key: $event.idempotency_key}'`,
		`body: '[$ENV, env]'`, 1))
	r, _ := tab.Route("create-shipment")
	body, _, err := r.Body(ctx, checkout, []byte(`{}`), "")
	require.NoError(t, err)
	require.Equal(t, `[{},{}]`, string(body))
}

// One compiled table serves every request and job at once.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	tab := setup(t, routesYAML)
	ship, _ := tab.Route("create-shipment")
	want, _, err := ship.Body(context.Background(), checkout, payload("true"), "")
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				got, _, err := ship.Body(context.Background(), checkout, payload("true"), "")
				if err != nil || string(got) != string(want) {
					t.Errorf("got %s, %v", got, err)
				}
				matched, _ := matchNames(tab, context.Background(), checkout, payload("true"))
				if len(matched) != 2 {
					t.Errorf("matched %v", matched)
				}
			}
		})
	}
	wg.Wait()
}

// jq programs are compiled once, by New, and each error names its key;
// config holds them as plain text.
func TestNewNamesTheKeyOfABadProgram(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ from, to, want string }{
		{`body: '{order: .data.object.metadata.order_id, amount: .data.object.amount_total, key: $event.idempotency_key}'`,
			`body: '{order: .id'`, "routes[0].body: is not a valid jq program: unexpected EOF"},
		{`filter: '.data.object.metadata.ship == "true"'`, `filter: '$order.id'`,
			"routes[0].filter: does not compile as jq: variable not defined: $order"},
		{`result: .id`, `result: 'shipment_id(.)'`, "routes[0].result: does not compile as jq: function not defined: shipment_id/1"},
	} {
		cfg, err := config.Parse([]byte(strings.Replace(routesYAML, tt.from, tt.to, 1)))
		require.NoError(t, err, "config does not read programs")
		_, err = New(cfg, map[string]map[string]string{"create-shipment": {"Authorization": "Bearer sk_test"}})
		require.EqualError(t, err, tt.want)
	}
}

// matchNames is Match over a body the verifier did not parse, by route name.
func matchNames(tab *Table, ctx context.Context, ev Event, body []byte) ([]string, []Unmatched) {
	matched, unmatched := tab.Match(ctx, NewInput(ev, http.Header{}, body, nil))
	var names []string
	for _, r := range matched {
		names = append(names, r.Name)
	}
	return names, unmatched
}

// The body is parsed once per request: not again when the verifier parsed
// it, and once for every filter and business key when it did not.
func TestBodyIsParsedOnce(t *testing.T) {
	t.Parallel()
	tab := setup(t, strings.Replace(routesYAML, "    result: .id\n", "    result: .id\n    business_key: [\"json:data.object.metadata.order_id\"]\n", 1))
	ship, _ := tab.Route("create-shipment")

	// What the verifier parsed is used as is: the raw bytes are not read.
	parsed, err := decode(payload("true"))
	require.NoError(t, err)
	in := NewInput(checkout, http.Header{}, []byte("not read"), parsed.(map[string]any))
	matched, _ := tab.Match(context.Background(), in)
	require.Equal(t, ship, matched[0])
	key, err := ship.BusinessKey(in)
	require.NoError(t, err)
	require.Equal(t, `["ord_9"]`, key)

	// Parsed on first use, then shared.
	in = NewInput(checkout, http.Header{}, payload("true"), nil)
	matched, _ = tab.Match(context.Background(), in)
	require.Equal(t, ship, matched[0])
	in.Body = nil // a second parse would find nothing
	key, err = matched[0].BusinessKey(in)
	require.NoError(t, err)
	require.Equal(t, `["ord_9"]`, key)
}

// TestMatchFansOutInFileOrder: an event goes to every route of its
// provider whose event patterns take its type, in file order.
func TestMatchFansOutInFileOrder(t *testing.T) {
	t.Parallel()
	tab := setup(t, `
providers:
  - {name: stripe, scheme: stripe, secrets_env: [STRIPE_WEBHOOK_SECRET]}
  - {name: github, scheme: github, secrets_env: [GITHUB_WEBHOOK_SECRET]}
  - {name: shopify, scheme: shopify, secrets_env: [SHOPIFY_WEBHOOK_SECRET]}
routes:
  - {name: invoices, provider: stripe, events: ["invoice.*"], url: "http://a.internal/"}
  - {name: github-all, provider: github, events: ["*"], url: "http://b.internal/"}
  - {name: stripe-all, provider: stripe, events: ["*"], url: "http://c.internal/"}
  - {name: paid, provider: stripe, events: ["invoice.paid"], url: "http://d.internal/"}
  - {name: orders, provider: shopify, events: ["orders/*"], url: "http://e.internal/"}
`)
	tests := []struct {
		name      string
		provider  string
		eventType string
		want      []string
	}{
		{"FansOutInFileOrder", "stripe", "invoice.paid", []string{"invoices", "stripe-all", "paid"}},
		{"OnlyCatchAll", "stripe", "charge.refunded", []string{"stripe-all"}},
		{"OtherProviderOnly", "github", "invoice.paid", []string{"github-all"}},
		{"ShopifyTopic", "shopify", "orders/create", []string{"orders"}},
		{"NoRouteMatches", "shopify", "products/create", nil},
		{"UnknownProvider", "paypal", "invoice.paid", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, unmatched := matchNames(tab, context.Background(), Event{Provider: tt.provider, ID: "evt_1", Type: tt.eventType}, []byte(`{}`))
			require.Equal(t, tt.want, got)
			require.Empty(t, unmatched)
		})
	}
}

// TestTableAttemptsAndDependents: the table answers a route's
// max_attempts and whether another route runs after it, and 0 and false
// for a route not configured.
func TestTableAttemptsAndDependents(t *testing.T) {
	t.Parallel()
	tab := setup(t, chainYAML)
	require.True(t, tab.HasDependents("create-shipment"))
	require.True(t, tab.HasDependents("print-label"))
	require.False(t, tab.HasDependents("notify"))
	require.False(t, tab.HasDependents("loose"))
	require.False(t, tab.HasDependents("gone"))
	require.Equal(t, 10, tab.MaxAttempts("notify"), "the default")
	require.Zero(t, tab.MaxAttempts("gone"))
}
