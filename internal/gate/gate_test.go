package gate_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/gate"
	"github.com/hookgate/hookgate/internal/route"
)

// TestMatch: the claim request of an event names the routes that take it
// (filters and chains applied), carries each route's business key, a
// missing one named, and the routes each waits for; the event's own fields
// pass through untouched.
func TestMatch(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`providers:
  - {name: stripe, scheme: stripe, secrets_env: [K]}
routes:
  - {name: ship, provider: stripe, events: ["invoice.*"], url: "http://x.example/ship", business_key: ["json:data.object.customer"]}
  - {name: mail, provider: stripe, events: [invoice.paid], url: "http://x.example/mail", after: [ship], business_key: ["header:X-Missing"]}
  - {name: big, provider: stripe, events: [invoice.paid], url: "http://x.example/big", filter: ".data.object.amount > 100"}
  - {name: other, provider: stripe, events: [charge.refunded], url: "http://x.example/other"}
`))
	require.NoError(t, err)
	table, err := route.New(cfg, nil)
	require.NoError(t, err)
	body := []byte(`{"id":"evt_1","type":"invoice.paid","data":{"object":{"customer":"cus_9","amount":50}}}`)
	ev := claim.Event{Provider: "stripe", ID: "evt_1", Type: "invoice.paid", Payload: body, Source: claim.SourceReconcile}
	req, unmatched := gate.Match(t.Context(), table, ev, http.Header{}, nil)
	require.Equal(t, []string{"ship", "mail"}, req.Routes)
	require.Equal(t, []route.Unmatched{{Route: "big"}}, unmatched)
	require.Len(t, req.Event.BusinessKeys, 2)
	require.Equal(t, claim.BusinessKey{Route: "ship", Key: `["cus_9"]`}, req.Event.BusinessKeys[0])
	require.Equal(t, "mail", req.Event.BusinessKeys[1].Route)
	require.Contains(t, req.Event.BusinessKeys[1].Missing, "X-Missing")
	require.Equal(t, map[string][]string{"mail": {"ship"}}, req.Event.After)
	require.Equal(t, claim.SourceReconcile, req.Event.Source)
	require.Equal(t, body, req.Event.Payload)
}
