package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBreakerSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       Breaker
		err        string
	}{
		{name: "DefaultOn", want: defaultBreaker},
		{name: "Off", yaml: "    breaker: off\n", want: Breaker{Off: true, Failures: 10, CoolDown: Duration(30 * time.Second), MaxCoolDown: Duration(10 * time.Minute)}},
		{name: "False", yaml: "    breaker: false\n", want: Breaker{Off: true, Failures: 10, CoolDown: Duration(30 * time.Second), MaxCoolDown: Duration(10 * time.Minute)}},
		{name: "Partial", yaml: "    breaker: {failures: 3}\n", want: Breaker{Failures: 3, CoolDown: Duration(30 * time.Second), MaxCoolDown: Duration(10 * time.Minute)}},
		{name: "LongCoolDownRaisesTheDefaultMax", yaml: "    breaker: {cool_down: 20m}\n",
			want: Breaker{Failures: 10, CoolDown: Duration(20 * time.Minute), MaxCoolDown: Duration(20 * time.Minute)}},
		{name: "UnknownKey", yaml: "    breaker: {failure: 3}\n", err: "field failure not found"},
		{name: "OtherWord", yaml: "    breaker: on\n", err: `breaker is off or a mapping of failures, cool_down and max_cool_down, not "on"`},
		{name: "BadDuration", yaml: "    breaker: {cool_down: soon}\n", err: `"soon" is not a duration`},
		{name: "ZeroFailures", yaml: "    breaker: {failures: -1}\n", err: "routes[0].breaker.failures: must be between 1 and 1000, got -1"},
		{name: "CoolDownOverMax", yaml: "    breaker: {cool_down: 2m, max_cool_down: 1m}\n", err: "routes[0].breaker.cool_down: 2m0s is longer than max_cool_down (1m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(minimal + tc.yaml))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c.Routes[0].Breaker)
			require.Equal(t, tc.want.On(), !tc.want.Off)
		})
	}
}

func TestSuccessKeyIsKept(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(minimal + "    success: '.body.ok == true'\n"))
	require.NoError(t, err)
	require.Equal(t, ".body.ok == true", c.Routes[0].Success)
}
