package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
)

// checkout is a paid checkout as the test provider sends it, shaped like
// Stripe's checkout.session.completed.
func checkout(id, ship, label, grams string) event {
	raw := fmt.Sprintf(`{"id":%q,"type":"checkout.session.completed","data":{"object":{"id":"cs_%s",`+
		`"metadata":{"ship":%q,"label":%q,"order_id":"ord_%s","grams":%q},`+
		`"shipping_details":{"name":"Ada Lovelace","address":{"country":"GB","city":"London"}}}}}`,
		id, id, ship, label, id, grams)
	return event{id: id, typ: "checkout.session.completed", raw: []byte(raw)}
}

// shipmentBody is the create-shipment route's body program.
const shipmentBody = `{order: .data.object.metadata.order_id, reference: $event.id, ` +
	`to: {name: .data.object.shipping_details.name, country: .data.object.shipping_details.address.country}}`

// labelBody fails at run time when grams is not a number.
const labelBody = `{order: .data.object.metadata.order_id, grams: (.data.object.metadata.grams | tonumber)}`

func TestRouteCallsTheDownstreamAPI(t *testing.T) {
	t.Parallel()
	sh := newShipper(t, (*httptest.Server).Start)
	s := newStack(t, []route{
		{
			name: "create-shipment", events: []string{"checkout.session.completed"}, url: sh.URL + "/v1/shipments",
			signed: true, maxAttempts: 3,
			extra: `    filter: '.data.object.metadata.ship == "true"'
    headers: { Accept: application/json }
    secret_headers: { Authorization: E2E_SHIPPER_AUTHORIZATION }
    idempotency_header: X-Idempotency-Key
    body: '` + shipmentBody + `'
    result: .id
`,
		},
		{
			name: "create-label", events: []string{"checkout.session.completed"},
			extra: `    filter: '.data.object.metadata.label == "true"'
    body: '` + labelBody + `'
`,
		},
		{name: "notify", events: []string{"checkout.*"}},
	})
	s.env = append(s.env, "E2E_SHIPPER_AUTHORIZATION=Bearer "+shipperToken)
	ingest, worker := s.ingest(), s.worker()
	signer, err := standardwebhooks.NewWebhook(routeSecret)
	require.NoError(t, err)

	t.Run("ShapedBodySecretHeaderAndTheShipmentIDAsResult", func(t *testing.T) {
		e := checkout("evt_ship", "true", "false", "500")
		s.claimed(ingest, e)
		_, ds := s.waitStatus(e.id, claim.Completed, settle)
		require.Len(t, ds, 2, "create-shipment and notify; create-label's filter said no")

		k := key(e.id, "create-shipment")
		calls := sh.callsFor(k)
		require.Len(t, calls, 1)
		c := calls[0]
		require.Equal(t, http.StatusCreated, c.status, "the API accepted the shape, the token and the key")
		require.Equal(t, `{"order":"ord_evt_ship","reference":"evt_ship","to":{"country":"GB","name":"Ada Lovelace"}}`, string(c.body))
		require.Equal(t, "Bearer "+shipperToken, c.header.Get("Authorization"))
		require.Equal(t, "application/json", c.header.Get("Accept"))
		require.Equal(t, "application/json", c.header.Get("Content-Type"))
		require.Empty(t, c.header.Values("Idempotency-Key"), "the key travels in the route's idempotency_header")
		require.NoError(t, signer.Verify(c.body, c.header), "the signature covers the shaped bytes")

		require.JSONEq(t, `"shp_1"`, string(deliveryOf(t, ds, "create-shipment").Result))
		require.Nil(t, deliveryOf(t, ds, "notify").Result)
		notify := s.down.callsFor(key(e.id, "notify"))
		require.Len(t, notify, 1)
		require.Equal(t, string(e.raw), string(notify[0].body), "a route without body relays the provider's bytes")

		out, code := s.run("claims", "show", provider, e.id)
		require.Zero(t, code, out)
		require.Regexp(t, `create-shipment\s+completed\s.*"shp_1"`, out)
		out, code = s.run("claims", "show", provider, e.id, "--json")
		require.Zero(t, code, out)
		var v struct {
			Deliveries []struct {
				Route  string          `json:"route"`
				Result json.RawMessage `json:"result"`
			} `json:"deliveries"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &v))
		require.Equal(t, "create-shipment", v.Deliveries[0].Route)
		require.JSONEq(t, `"shp_1"`, string(v.Deliveries[0].Result))
		out, code = s.run("claims", "export", "--provider", provider)
		require.Zero(t, code, out)
		require.NoError(t, json.Unmarshal([]byte(strings.Split(strings.TrimSpace(out), "\n")[0]), &v))
		require.JSONEq(t, `"shp_1"`, string(v.Deliveries[0].Result), "export carries the result too")

		require.NotContains(t, worker.out.String(), shipperToken, "the secret header is never logged")
		require.NotContains(t, ingest.out.String(), shipperToken)
	})

	t.Run("RetryAfter503SendsTheSameBytesWithTheSameKey", func(t *testing.T) {
		e := checkout("evt_retry", "true", "false", "500")
		k := key(e.id, "create-shipment")
		sh.fail(k, 1)
		s.claimed(ingest, e)
		_, ds := s.waitStatus(e.id, claim.Completed, settle)

		calls := sh.callsFor(k)
		require.Len(t, calls, 2)
		require.Equal(t, []int{http.StatusServiceUnavailable, http.StatusCreated}, []int{calls[0].status, calls[1].status})
		require.Equal(t, calls[0].body, calls[1].body, "byte-identical on every attempt")
		require.Equal(t, []string{"1", "2"}, []string{calls[0].header.Get("Hookgate-Attempt"), calls[1].header.Get("Hookgate-Attempt")})
		for _, c := range calls {
			require.NoError(t, signer.Verify(c.body, c.header))
		}
		d := deliveryOf(t, ds, "create-shipment")
		require.Equal(t, 2, d.AttemptCount)
		require.JSONEq(t, `"shp_2"`, string(d.Result))
		require.Equal(t, 2, sh.shipments(), "one shipment per event")
	})

	t.Run("ForcedRerunIsAbsorbedByTheAPIsDedupe", func(t *testing.T) {
		e := checkout("evt_ship", "", "", "")
		before := sh.shipments()
		out, code := s.run("claims", "retry", provider, e.id, "--force")
		require.Zero(t, code, out)
		_, ds := s.waitStatus(e.id, claim.Completed, settle)
		calls := sh.callsFor(key(e.id, "create-shipment"))
		require.Len(t, calls, 2)
		require.Equal(t, calls[0].body, calls[1].body, "the same bytes, the same key")
		require.Equal(t, before, sh.shipments(), "the API saw the key before and created nothing")
		require.JSONEq(t, `"shp_1"`, string(deliveryOf(t, ds, "create-shipment").Result), "the same shipment")
	})

	t.Run("FilterThatSaysNoCreatesNoDeliveryWhileASiblingGetsOne", func(t *testing.T) {
		e := checkout("evt_pickup", "false", "false", "500")
		s.claimed(ingest, e)
		_, ds := s.waitStatus(e.id, claim.Completed, settle)
		require.Len(t, ds, 1)
		require.Equal(t, "notify", ds[0].Route)
		require.Empty(t, sh.callsFor(key(e.id, "create-shipment")))
		require.Zero(t, s.jobsOf(e.id), "notify's job's row went with its end")

		metrics := scrape(t, ingest)
		require.Contains(t, metrics, `hookgate_route_filtered_total{result="false",route="create-shipment"} 1`)
		require.Contains(t, metrics, `hookgate_route_filtered_total{result="error",route="create-shipment"} 0`)
	})

	t.Run("RunTimeErrorFailsTheDeliveryForGoodUntilTheProgramIsFixed", func(t *testing.T) {
		e := checkout("evt_label", "false", "true", "heavy")
		s.claimed(ingest, e)
		c, ds := s.waitStatus(e.id, claim.Failed, settle)
		d := deliveryOf(t, ds, "create-label")
		require.Equal(t, claim.DeliveryFailed, d.Status)
		require.Equal(t, `route program failed: routes[1].body: tonumber cannot be applied to its input`, d.LastError)
		require.Zero(t, d.AttemptCount, "nothing was sent, so no attempt is counted")
		require.Empty(t, s.down.callsFor(key(e.id, "create-label")))
		require.Equal(t, d.LastError, c.LastError)
		require.Equal(t, claim.DeliveryCompleted, deliveryOf(t, ds, "notify").Status, "a sibling is unaffected")

		// Retrying cannot fix a program; fixing the config and then
		// `claims retry` can.
		cfg, err := os.ReadFile(s.cfgPath)
		require.NoError(t, err)
		fixed := strings.Replace(string(cfg), "(.data.object.metadata.grams | tonumber)", "((.data.object.metadata.grams | tonumber?) // 0)", 1)
		require.NotEqual(t, string(cfg), fixed)
		require.NoError(t, os.WriteFile(s.cfgPath, []byte(fixed), 0o600))
		worker.stop()
		worker = s.worker()
		out, code := s.run("claims", "retry", provider, e.id)
		require.Zero(t, code, out)
		_, ds = s.waitStatus(e.id, claim.Completed, settle)
		calls := s.down.callsFor(key(e.id, "create-label"))
		require.Len(t, calls, 1)
		require.Equal(t, `{"grams":0,"order":"ord_evt_label"}`, string(calls[0].body))
		require.Equal(t, 1, deliveryOf(t, ds, "create-label").AttemptCount)
	})
}

// scrape returns p's /metrics.
func scrape(t *testing.T, p *proc) string {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Each config error stops both binaries at start with the key named.
func TestRouteConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, extra, want string
	}{
		{"BadJQ", "    body: '{order: .id'\n", "routes[0].body: is not a valid jq program: unexpected EOF"},
		{"UnknownMethod", "    method: DELETE\n", `routes[0].method: "DELETE" is not a supported method (one of POST, PUT, PATCH)`},
		{"MissingSecretVariable", "    secret_headers: { Authorization: E2E_UNSET_AUTHORIZATION }\n",
			"routes[0].secret_headers.Authorization: environment variable E2E_UNSET_AUTHORIZATION is not set or empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, []route{{name: "ship", events: []string{"*"}, extra: tt.extra}})
			for _, bin := range []string{bins.ingest, bins.worker} {
				cmd := exec.Command(bin)
				cmd.Env = s.env
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s must not start:\n%s", bin, out)
				require.Equal(t, 1, ee.ExitCode())
				require.Contains(t, string(out), tt.want)
			}
		})
	}
}
