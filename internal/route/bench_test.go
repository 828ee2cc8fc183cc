package route

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

// BenchmarkProgram runs ordinary programs over a Stripe event, compiled as
// routes compile them (bounded) and as gojq would as written (plain), in
// the same loop: the bounds must not slow them down. speed_vs_plain is
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
		plain, err := gojq.Compile(q, gojq.WithVariables(config.JQVariables))
		require.NoError(b, err)
		bounded, err := compile("routes[0].body", bc.src, false)
		require.NoError(b, err)
		plainRun := func() {
			doc, err := decode(payload)
			if err != nil {
				b.Fatal(err)
			}
			v, _ := plain.RunWithContext(context.Background(), doc, ev).Next()
			if _, isErr := v.(error); isErr {
				b.Fatal(v)
			}
		}
		boundedRun := func() {
			doc, err := decode(payload)
			if err != nil {
				b.Fatal(err)
			}
			if err := bounded.run(context.Background(), doc, len(payload), ev, func(any) bool { return false }); err != nil {
				b.Fatal(err)
			}
		}
		// The two alternate, so that a machine busy with other work slows
		// both alike; speed is plain's time over bounded's.
		b.Run(bc.name, func(b *testing.B) {
			var plainTime, boundedTime time.Duration
			for b.Loop() {
				start := time.Now()
				plainRun()
				mid := time.Now()
				boundedRun()
				boundedTime += time.Since(mid)
				plainTime += mid.Sub(start)
			}
			b.ReportMetric(float64(plainTime)/float64(boundedTime), "speed_vs_plain")
		})
	}
}
