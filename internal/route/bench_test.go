package route

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

// BenchmarkProgram runs ordinary programs over a Stripe event, compiled as
// routes compile them (bounded) and as they were compiled before the bounds
// (plain, the program as written), in the same loop: the bounds must not slow them down. speed_vs_plain is
// plain's time over bounded's (target ≥ 0.95); ns/op is the pair's.
func BenchmarkProgram(b *testing.B) {
	payload, err := os.ReadFile("../verify/testdata/stripe_checkout_session_completed.json")
	require.NoError(b, err)
	ev := map[string]any{"id": "evt_1", "route": "ship"}
	for _, bc := range []struct{ name, src string }{
		{"Filter", `.type == "checkout.session.completed" and .data.object.amount_total > 1000 and .data.object.metadata.ship != "false"`},
		{"Body", `{order: .data.object.client_reference_id, amount: (.data.object.amount_total / 100), currency: (.data.object.currency | ascii_upcase),` +
			` customer: {name: .data.object.customer_details.name, city: .data.object.customer_details.address.city}, ` +
			`tags: [.data.object.metadata | to_entries[] | "\(.key)=\(.value)"], ref: ("hg-" + $event.id)}`},
		{"Reshape", `.data.object | {id, total: (.amount_subtotal + .amount_total), meta: (.metadata + {source: "hookgate"})} | .meta.count += 1`},
	} {
		q, err := gojq.Parse(bc.src)
		require.NoError(b, err)
		// plain is the program as compiled before the bounds, run the same way.
		code, err := gojq.Compile(q, gojq.WithVariables([]string{"$event", "$results", budgetVar}))
		require.NoError(b, err)
		plain := &program{key: "routes[0].body", code: code}
		bounded, err := compile("routes[0].body", bc.src, false)
		require.NoError(b, err)
		plainRun := func() {
			doc, err := decode(payload)
			if err != nil {
				b.Fatal(err)
			}
			if err := plain.run(context.Background(), doc, len(payload), ev, nil, func(any) bool { return false }); err != nil {
				b.Fatal(err)
			}
		}
		boundedRun := func() {
			doc, err := decode(payload)
			if err != nil {
				b.Fatal(err)
			}
			if err := bounded.run(context.Background(), doc, len(payload), ev, nil, func(any) bool { return false }); err != nil {
				b.Fatal(err)
			}
		}
		// The two alternate, so that a machine busy with other work slows
		// both alike; speed is plain's time over bounded's.
		b.Run(bc.name, func(b *testing.B) {
			var plainTime, boundedTime time.Duration
			odd := false
			for b.Loop() {
				// Each goes first every other time: the second of a pair
				// runs on warmer caches.
				first, second, ft, st := plainRun, boundedRun, &plainTime, &boundedTime
				if odd {
					first, second, ft, st = boundedRun, plainRun, &boundedTime, &plainTime
				}
				odd = !odd
				start := time.Now()
				first()
				mid := time.Now()
				second()
				*st += time.Since(mid)
				*ft += mid.Sub(start)
			}
			b.ReportMetric(float64(plainTime)/float64(boundedTime), "speed_vs_plain")
		})
	}
}

// BenchmarkMatchAndKey is ingest's route work for a Stripe event with a
// filter and a business key: with the body the verifier parsed handed on
// (shared), and parsed again as before routes owned their programs
// (reparsed: once for the filters, once for the keys). speed_vs_reparsed is
// the reparsed time over the shared one.
func BenchmarkMatchAndKey(b *testing.B) {
	payload, err := os.ReadFile("../verify/testdata/stripe_checkout_session_completed.json")
	require.NoError(b, err)
	cfg, err := config.Parse([]byte(`
providers:
  - {name: stripe, scheme: stripe, secrets_env: [S]}
routes:
  - name: ship
    provider: stripe
    events: ["checkout.session.completed"]
    filter: '.data.object.amount_total > 1000'
    business_key: ["json:data.object.client_reference_id"]
    url: https://api.example/ship
`))
	require.NoError(b, err)
	tab, err := New(cfg, nil)
	require.NoError(b, err)
	ev := Event{Provider: "stripe", ID: "evt_1", Type: "checkout.session.completed"}
	verified := func() map[string]any { // what the verifier parses anyway
		doc, err := decode(payload)
		if err != nil {
			b.Fatal(err)
		}
		return doc.(map[string]any)
	}
	work := func(in *Input) {
		matched, _ := tab.Match(context.Background(), in)
		if len(matched) != 1 {
			b.Fatal("no match")
		}
		if _, err := matched[0].BusinessKey(in); err != nil {
			b.Fatal(err)
		}
	}
	var shared, reparsed time.Duration
	for b.Loop() {
		start := time.Now()
		work(NewInput(ev, http.Header{}, payload, verified()))
		mid := time.Now()
		parsed := verified()
		_ = parsed
		filters := NewInput(ev, http.Header{}, payload, nil)
		work(filters)
		keys := NewInput(ev, http.Header{}, payload, nil)
		_, _ = tab.routes[0].BusinessKey(keys)
		reparsed += time.Since(mid)
		shared += mid.Sub(start)
	}
	b.ReportMetric(float64(reparsed)/float64(shared), "speed_vs_reparsed")
}
