package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRateSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       *Rate
		err        string
	}{
		{name: "Absent"},
		{name: "Full", yaml: "    rate: {limit: 5, per: 1s, burst: 5}\n", want: &Rate{Limit: 5, Per: Duration(time.Second), Burst: 5}},
		{name: "NoBurst", yaml: "    rate: {limit: 2, per: 1s}\n", want: &Rate{Limit: 2, Per: Duration(time.Second)}},
		{name: "ShortestWindow", yaml: "    rate: {limit: 1, per: 100ms}\n", want: &Rate{Limit: 1, Per: Duration(100 * time.Millisecond)}},
		{name: "ZeroLimit", yaml: "    rate: {limit: 0, per: 1s}\n", err: "routes[0].rate.limit: must be between 1 and 1000000, got 0"},
		{name: "NegativeLimit", yaml: "    rate: {limit: -3, per: 1s}\n", err: "routes[0].rate.limit: must be between 1 and 1000000, got -3"},
		{name: "NoPer", yaml: "    rate: {limit: 5}\n", err: "routes[0].rate.per: must be at least 100ms, got 0s"},
		{name: "ShortPer", yaml: "    rate: {limit: 5, per: 99ms}\n", err: "routes[0].rate.per: must be at least 100ms, got 99ms"},
		{name: "NegativeBurst", yaml: "    rate: {limit: 5, per: 1s, burst: -1}\n", err: "routes[0].rate.burst: must be between 0 and 1000000, got -1"},
		{name: "UnknownKey", yaml: "    rate: {limit: 5, per: 1s, bust: 1}\n", err: "bust"},
		{name: "BadDuration", yaml: "    rate: {limit: 5, per: soon}\n", err: `"soon" is not a duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(minimal + tc.yaml))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c.Routes[0].Rate)
		})
	}
}
