package n8ncheck

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookgate/hookgate/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The check runs the guide's worked example: its config, with the
// addresses made local, loads, keeps what the guide says of n8n routes, and
// points nowhere but the loopback interface.
func TestN8nCheckConfig(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../../docs/n8n.md")
	require.NoError(t, err)
	b, err := n8nCheckConfig(guide, "127.0.0.1:18080", "127.0.0.1:19091", "http://127.0.0.1:17000", "http://127.0.0.1:15678")
	require.NoError(t, err)
	c, err := config.Parse(b)
	require.NoError(t, err, string(b))
	require.Equal(t, "127.0.0.1:18080", c.Ingest.Listen)
	require.Equal(t, "127.0.0.1:19091", c.Worker.Listen)

	notify, ok := c.Route("notify-ops")
	require.True(t, ok)
	require.Equal(t, "http://127.0.0.1:15678/webhook/checkout-paid", notify.URL)
	require.Equal(t, []int{404}, notify.RetryStatuses)
	ship, ok := c.Route("create-shipment")
	require.True(t, ok)
	require.Equal(t, "http://127.0.0.1:17000/v1/shipments", ship.URL)

	paths := map[string]bool{}
	for _, w := range checkWorkflows() {
		paths[w.path] = true
	}
	for _, r := range c.Routes {
		u, err := url.Parse(r.URL)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", u.Hostname(), "route %s", r.Name)
		if strings.HasPrefix(r.URL, "http://127.0.0.1:15678/webhook/") {
			require.True(t, paths[strings.TrimPrefix(u.Path, "/webhook/")], "route %s has a workflow", r.Name)
		}
	}
	for _, name := range []string{"check-restart-success", "check-respond-success"} {
		r, ok := c.Route(name)
		require.True(t, ok, name)
		require.Equal(t, ".body.ok == true", r.Success, "%s has docs/n8n.md's success setting", name)
	}
	plain, _ := c.Route("check-restart-plain")
	require.Empty(t, plain.RetryStatuses, "the comparison route shows what a restart does without them")

	_, err = n8nCheckConfig([]byte("no yaml here"), "a", "b", "c", "d")
	require.ErrorContains(t, err, "no yaml block")
}

func TestN8nWorkflowsJSON(t *testing.T) {
	t.Parallel()
	b, err := n8nWorkflowsJSON(checkWorkflows(), "http://127.0.0.1:17000")
	require.NoError(t, err)
	var wfs []struct {
		ID    string `json:"id"`
		Nodes []struct {
			Name        string         `json:"name"`
			Type        string         `json:"type"`
			Parameters  map[string]any `json:"parameters"`
			Credentials map[string]any `json:"credentials"`
		} `json:"nodes"`
		Connections map[string]any `json:"connections"`
	}
	require.NoError(t, json.Unmarshal(b, &wfs))
	require.Len(t, wfs, len(checkWorkflows()))
	require.Equal(t, "hgcheckprobe0001", wfs[len(wfs)-1].ID, "the probe is activated last")

	seen := map[string]bool{}
	for i, wf := range wfs {
		w := checkWorkflows()[i]
		require.False(t, seen[w.path], "path %s is unique", w.path)
		seen[w.path] = true
		hook := wf.Nodes[0]
		require.Equal(t, "n8n-nodes-base.webhook", hook.Type)
		require.Equal(t, w.path, hook.Parameters["path"])
		require.Equal(t, w.respond, hook.Parameters["responseMode"])
		require.Equal(t, w.headerAuth, hook.Credentials != nil, w.path)
		require.Len(t, wf.Connections, len(wf.Nodes)-1, "%s: a chain", w.path)
		var types []string
		for _, n := range wf.Nodes {
			types = append(types, n.Type)
			if n.Type == "n8n-nodes-base.httpRequest" {
				require.Equal(t, "http://127.0.0.1:17000/effect/"+w.path, n.Parameters["url"])
				header := n.Parameters["headerParameters"].(map[string]any)["parameters"].([]any)[0].(map[string]any)
				require.Equal(t, "Idempotency-Key", header["name"])
				require.Contains(t, header["value"], `headers["idempotency-key"]`, "the workflow passes the key on")
			}
		}
		require.Equal(t, w.respond == "responseNode", slices.Contains(types, "n8n-nodes-base.respondToWebhook"), w.path)
		require.Equal(t, w.waitSeconds > 0, slices.Contains(types, "n8n-nodes-base.wait"), w.path)
		for _, n := range wf.Nodes {
			if n.Type == "n8n-nodes-base.respondToWebhook" && w.respondBody != "" {
				require.Equal(t, w.respondBody, n.Parameters["responseBody"], w.path)
			}
		}
	}

	cred, err := n8nCredentialsJSON("X-Hookgate-Token", "tok")
	require.NoError(t, err)
	require.JSONEq(t, `[{"id":"`+n8nCredentialID+`","name":"hookgate token","type":"httpHeaderAuth","data":{"name":"X-Hookgate-Token","value":"tok"}}]`, string(cred))
}

func TestN8nPackageJSON(t *testing.T) {
	t.Parallel()
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
		Overrides    map[string]string `json:"overrides"`
	}
	require.NoError(t, json.Unmarshal(n8nPackageJSON(), &p))
	require.Equal(t, map[string]string{"n8n": n8nVersion}, p.Dependencies, "pinned")
	require.Equal(t, map[string]string{"xlsx": n8nXLSXVersion}, p.Overrides, "xlsx from the registry")
}

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		v    string
		want bool
	}{
		{"20.19.0", true}, {"20.20.2", true}, {"22.1.0", true}, {"20.19", true},
		{"20.18.9", false}, {"18.20.4", false}, {"20", false}, {"", false},
	} {
		require.Equal(t, tt.want, versionAtLeast(tt.v, n8nMinNode), tt.v)
	}
}

// n8n listens on the loopback interface only, and is told its database
// from the URL, password included, never through its command line.
func TestN8nEnvironment(t *testing.T) {
	t.Parallel()
	env, err := n8nEnvironment("postgres://u:p%40ss@127.0.0.1:5433/n8n_check?sslmode=disable", "/tmp/h", "127.0.0.1:15678", "127.0.0.1:15679")
	require.NoError(t, err)
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	for k, want := range map[string]string{
		"DB_TYPE": "postgresdb", "DB_POSTGRESDB_HOST": "127.0.0.1", "DB_POSTGRESDB_PORT": "5433",
		"DB_POSTGRESDB_DATABASE": "n8n_check", "DB_POSTGRESDB_USER": "u", "DB_POSTGRESDB_PASSWORD": "p@ss",
		"N8N_LISTEN_ADDRESS": "127.0.0.1", "N8N_PORT": "15678",
		"N8N_RUNNERS_BROKER_LISTEN_ADDRESS": "127.0.0.1", "N8N_RUNNERS_BROKER_PORT": "15679",
		"N8N_EXPRESSION_ENGINE": "legacy", "N8N_DIAGNOSTICS_ENABLED": "false",
	} {
		require.Equal(t, want, m[k], k)
	}
}

// The recorder is a downstream that deduplicates by key, with the failures
// the scenarios need.
func TestRecorder(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	rec.shipperAuth = "Bearer sk"
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	post := func(path, keyHeader, key, auth string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/"+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set(keyHeader, key)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 2 {
		require.Equal(t, http.StatusOK, post("effect/hg-duplicates", "Idempotency-Key", "k1", ""))
	}
	require.Equal(t, http.StatusOK, post("effect/hg-duplicates", "Idempotency-Key", "k2", ""))
	calls, effects := rec.stats("effect/hg-duplicates")
	require.Equal(t, [2]int{3, 2}, [2]int{calls, effects}, "one effect per key")
	require.Equal(t, []string{"k1×2"}, rec.repeated("effect/hg-duplicates"))
	require.Equal(t, http.StatusBadRequest, post("effect/hg-duplicates", "X-Other", "k3", ""), "no key, no effect")

	for _, path := range []string{"effect/hg-failing", "effect/hg-respond-success"} {
		for _, want := range []int{500, 500, 200, 200} {
			require.Equal(t, want, post(path, "Idempotency-Key", "k", ""), path)
		}
		_, effects = rec.stats(path)
		require.Equal(t, 1, effects, path)
	}

	require.Equal(t, http.StatusUnauthorized, post("v1/shipments", "X-Idempotency-Key", "s", "Bearer wrong"))
	require.Equal(t, http.StatusServiceUnavailable, post("v1/shipments", "X-Idempotency-Key", "s", "Bearer sk"))
	require.Equal(t, http.StatusCreated, post("v1/shipments", "X-Idempotency-Key", "s", "Bearer sk"))
	require.Equal(t, http.StatusCreated, post("v1/shipments", "X-Idempotency-Key", "s", "Bearer sk"))
	_, effects = rec.stats("v1/shipments")
	require.Equal(t, 1, effects, "one shipment per key")
}
