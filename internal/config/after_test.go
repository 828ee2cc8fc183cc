package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidateAfter: after names routes that exist and take the same
// provider's events, each once, without a cycle; each refusal names the
// routes involved.
func TestValidateAfter(t *testing.T) {
	t.Parallel()
	// chain adds print-label and notify (stripe) after ship-order (routes[0]).
	chain := func(c *Config) {
		label, notify := c.Routes[0], c.Routes[0]
		label.Name, label.After = "print-label", []string{"ship-order"}
		notify.Name, notify.After = "notify", []string{"print-label", "ship-order"}
		c.Routes = append(c.Routes, label, notify)
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string
	}{
		{name: "Chain", mutate: chain},
		{
			name: "UnknownName",
			mutate: func(c *Config) {
				chain(c)
				c.Routes[2].After = []string{"create-shipment"}
			},
			want: []string{`routes[2].after[0]: route "print-label" runs after "create-shipment", which is not a configured route`},
		},
		{
			name:   "OtherProvider",
			mutate: func(c *Config) { c.Routes[0].After = []string{"acme-all"} },
			want: []string{`routes[0].after[0]: route "ship-order" (provider "stripe") cannot run after "acme-all", ` +
				`a route of provider "acme": both must take the same events`},
		},
		{
			name:   "Itself",
			mutate: func(c *Config) { c.Routes[0].After = []string{"ship-order"} },
			want:   []string{`routes[0].after[0]: route "ship-order" cannot run after itself`},
		},
		{
			name: "Twice",
			mutate: func(c *Config) {
				chain(c)
				c.Routes[2].After = []string{"ship-order", "ship-order"}
			},
			want: []string{`routes[2].after[1]: route "print-label" names "ship-order" twice`},
		},
		{
			name: "Cycle",
			mutate: func(c *Config) {
				chain(c)
				c.Routes[0].After = []string{"notify"}
			},
			// Two cycles, each reported at the route that closes it.
			want: []string{
				`routes[2].after: routes form a cycle: "ship-order" -> "notify" -> "print-label" -> "ship-order" (each runs after the next)`,
				`routes[3].after: routes form a cycle: "ship-order" -> "notify" -> "ship-order" (each runs after the next)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t)
			tt.mutate(c)
			require.Equal(t, tt.want, problems(c.Validate()))
		})
	}

}
