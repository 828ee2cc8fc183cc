package telemetry_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/telemetry"
)

func TestRequested(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: false},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: false},
	} {
		require.Equal(t, tc.want, telemetry.Requested(func(k string) string { return tc.env[k] }), "%v", tc.env)
	}
}

func TestOffByDefault(t *testing.T) {
	t.Parallel()
	tr, err := telemetry.New(t.Context(), func(string) string { return "" }, "test")
	require.NoError(t, err)
	require.False(t, tr.Enabled())
	require.Nil(t, tr.Tracer("x"))
	require.Empty(t, tr.RiverMiddleware())
	require.NoError(t, tr.Shutdown(t.Context()))
	var none *telemetry.Tracing
	require.False(t, none.Enabled())
}
