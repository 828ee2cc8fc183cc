package route

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

const chainYAML = `
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
    result: '{id: .id, tracking: .tracking_number}'
  - name: print-label
    provider: stripe
    events: ["checkout.session.completed"]
    after: [create-shipment]
    url: https://api.shipper.example/v1/shipments/
    path: '[$results["create-shipment"].id, "label"]'
    body: '{format: "pdf", tracking: $results["create-shipment"].tracking, seen: ($results | keys)}'
    result: '{label: .url, shipment: $results["create-shipment"].id}'
  - name: notify
    provider: stripe
    events: ["checkout.*"]
    after: [print-label]
    url: https://n8n.internal/webhook/paid
    filter: '$results == {"print-label": null}'
  - name: loose
    provider: stripe
    events: ["checkout.*"]
    url: https://n8n.internal/webhook/orders?tenant=a
    path: '.data.object.metadata.order_id'
`

func chained(results map[string][]byte) Event {
	ev := checkout
	ev.Results = results
	return ev
}

// TestAfterMatchesOnlyWithItsPredecessors: a route with after takes an
// event only when each route it names takes it, down the chain; at ingest
// $results holds null for each predecessor.
func TestAfterMatchesOnlyWithItsPredecessors(t *testing.T) {
	t.Parallel()
	tab := setup(t, chainYAML)
	names := func(ship string) []string {
		matched, _ := tab.Match(context.Background(), NewInput(checkout, nil, payload(ship), nil))
		var out []string
		for _, r := range matched {
			out = append(out, r.Name)
		}
		return out
	}
	require.Equal(t, []string{"create-shipment", "print-label", "notify", "loose"}, names("true"))
	require.Equal(t, []string{"loose"}, names("false"), "print-label and notify follow create-shipment out")
}

// TestResults: every program of a chained route sees its predecessors'
// recorded results by name, null where none is recorded.
func TestResults(t *testing.T) {
	t.Parallel()
	tab := setup(t, chainYAML)
	label, _ := tab.Route("print-label")
	ctx := context.Background()
	ev := chained(map[string][]byte{"create-shipment": []byte(`{"id":"shp_1","tracking":"1Z9"}`)})
	body, _, err := label.Body(ctx, ev, payload("true"), "application/json")
	require.NoError(t, err)
	require.JSONEq(t, `{"format":"pdf","tracking":"1Z9","seen":["create-shipment"]}`, string(body))
	res, err := label.Result(ctx, ev, []byte(`{"url":"https://labels/1.pdf"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"label":"https://labels/1.pdf","shipment":"shp_1"}`, string(res))

	body, _, err = label.Body(ctx, chained(nil), payload("true"), "application/json")
	require.NoError(t, err)
	require.JSONEq(t, `{"format":"pdf","tracking":null,"seen":["create-shipment"]}`, string(body), "null where none is recorded")
}

// TestTarget: path's segments are appended to url, each percent-escaped;
// scheme, host and url's own path and query never change, and a segment
// that would step out of url is refused.
func TestTarget(t *testing.T) {
	t.Parallel()
	tab := setup(t, chainYAML)
	label, _ := tab.Route("print-label")
	loose, _ := tab.Route("loose")
	notify, _ := tab.Route("notify")
	ctx := context.Background()
	target := func(r *Route, shipment string) (string, error) {
		return r.Target(ctx, chained(map[string][]byte{"create-shipment": []byte(`{"id":` + shipment + `}`)}), payload("true"))
	}

	got, err := target(label, `"shp_1"`)
	require.NoError(t, err)
	require.Equal(t, "https://api.shipper.example/v1/shipments/shp_1/label", got)
	got, err = target(notify, `"x"`)
	require.NoError(t, err)
	require.Equal(t, "https://n8n.internal/webhook/paid", got, "no path: the url as written")

	for _, hostile := range []string{`"a/../../admin"`, `"@evil.example"`, `"x?y=1#z"`, `"//evil.example/p"`, `"%2e%2e"`, `"é ü"`} {
		got, err := target(label, hostile)
		require.NoError(t, err, hostile)
		u, err := url.Parse(got)
		require.NoError(t, err)
		require.Equal(t, "https", u.Scheme, hostile)
		require.Equal(t, "api.shipper.example", u.Host, hostile)
		require.Empty(t, u.RawQuery, hostile)
		require.Empty(t, u.Fragment, hostile)
		require.Regexp(t, `^/v1/shipments/[^/]+/label$`, u.EscapedPath(), "%s stays one segment", hostile)
	}
	got, err = target(label, `"a/b"`)
	require.NoError(t, err)
	require.Equal(t, "https://api.shipper.example/v1/shipments/a%2Fb/label", got)

	for _, refused := range []string{`".."`, `"."`, `""`, `null`, `42`, `["a"]`} {
		_, err := target(label, refused)
		require.ErrorIs(t, err, ErrProgram, refused)
		require.ErrorContains(t, err, "routes[1].path", refused)
	}

	// A path on a url with a query keeps the query.
	got, err = loose.Target(ctx, checkout, payload("true"))
	require.NoError(t, err)
	require.Equal(t, "https://n8n.internal/webhook/orders/ord_9?tenant=a", got)
	_, err = loose.Target(ctx, checkout, []byte(`{"data":{"object":{"metadata":{"order_id":["a","b",{"c":1}]}}}}`))
	require.True(t, errors.Is(err, ErrProgram))
	require.ErrorContains(t, err, "the list holds a value of type object")
}
