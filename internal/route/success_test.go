package route

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

// successRoute is the notify route of routesYAML with success program src.
func successRoute(t *testing.T, src string) *Route {
	t.Helper()
	yaml := strings.Replace(routesYAML, "    url: https://n8n.internal/webhook/paid\n",
		"    url: https://n8n.internal/webhook/paid\n    success: '"+src+"'\n", 1)
	r, ok := setup(t, yaml).Route("notify")
	require.True(t, ok)
	return r
}

func TestSucceeded(t *testing.T) {
	t.Parallel()
	jsonHeader := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	for _, tc := range []struct {
		name, program string
		status        int
		header        http.Header
		body          string
		want          bool
		err           string
	}{
		{name: "JSONTrue", program: ".body.ok == true", status: 200, header: jsonHeader, body: `{"ok":true}`, want: true},
		{name: "JSONFalse", program: ".body.ok == true", status: 200, header: jsonHeader, body: `{"ok":false}`},
		{name: "StartingUpText", program: ".body.ok == true", status: 200, header: http.Header{"Content-Type": {"text/html"}},
			body: "n8n is starting up. Please wait", err: "routes[1].success: "},
		{name: "EmptyBody", program: ".body.ok == true", status: 200, header: jsonHeader, body: "", err: "routes[1].success: "},
		{name: "JSONWithoutJSONTypeIsText", program: ".body | type", status: 200, header: http.Header{}, body: `{"ok":true}`},
		{name: "TextIsAString", program: `.body == "{\"ok\":true}"`, status: 200, header: http.Header{}, body: `{"ok":true}`, want: true},
		{name: "BrokenJSONIsText", program: `.body == "{\"ok\":"`, status: 200, header: jsonHeader, body: `{"ok":`, want: true},
		{name: "PlusJSON", program: ".body.ok", status: 200, header: http.Header{"Content-Type": {"application/problem+json"}}, body: `{"ok":true}`, want: true},
		{name: "Status", program: ".status == 202", status: 202, header: http.Header{}, want: true},
		{name: "HeadersLowerCasedFirstValue", program: `.headers["x-result"] == "done"`, status: 200,
			header: http.Header{"X-Result": {"done", "later"}}, want: true},
		{name: "NotTrueIsFalse", program: "1", status: 200, header: http.Header{}},
		{name: "NothingIsFalse", program: "empty", status: 200, header: http.Header{}},
		{name: "SecondValueIgnored", program: "false, true", status: 200, header: http.Header{}},
		{name: "Runaway", program: "[range(1e9)] | length > 0", status: 200, header: http.Header{}, err: "routes[1].success: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := successRoute(t, tc.program)
			require.True(t, r.HasSuccess())
			ok, err := r.Succeeded(context.Background(), checkout, tc.status, tc.header, []byte(tc.body))
			require.Equal(t, tc.want, ok)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "starting up", "the error quotes nothing of the answer")
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestWithoutSuccessEveryAnswerSucceeds(t *testing.T) {
	t.Parallel()
	r, ok := setup(t, routesYAML).Route("notify")
	require.True(t, ok)
	require.False(t, r.HasSuccess())
	got, err := r.Succeeded(context.Background(), checkout, 200, http.Header{}, []byte("anything"))
	require.NoError(t, err)
	require.True(t, got)
}

// A success program that does not compile fails New, naming the route.
func TestBadSuccessNamesTheRoute(t *testing.T) {
	t.Parallel()
	yaml := strings.Replace(routesYAML, "    url: https://n8n.internal/webhook/paid\n",
		"    url: https://n8n.internal/webhook/paid\n    success: '.body.ok =='\n", 1)
	cfg, err := config.Parse([]byte(yaml))
	require.NoError(t, err)
	_, err = New(cfg, map[string]map[string]string{"create-shipment": {"Authorization": "Bearer sk_test"}})
	require.EqualError(t, err, "route notify: routes[1].success: is not a valid jq program: unexpected EOF")
}
