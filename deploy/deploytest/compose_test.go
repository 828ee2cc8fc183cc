package deploytest

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestCompose: the one-host file runs Postgres, then the migrations, then
// ingest and the worker, locked down like the cluster's pods.
func TestCompose(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../compose.yaml")
	require.NoError(t, err)
	var f struct {
		Services map[string]struct {
			Command   []string          `yaml:"command"`
			ReadOnly  bool              `yaml:"read_only"`
			User      string            `yaml:"user"`
			CapDrop   []string          `yaml:"cap_drop"`
			Env       map[string]string `yaml:"environment"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Healthcheck map[string]any `yaml:"healthcheck"`
			Profiles    []string       `yaml:"profiles"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f)) // resolves the anchors and merge keys
	require.ElementsMatch(t, []string{"postgres", "migrate", "ingest", "worker", "n8n"}, keys(f.Services))
	require.NotEmpty(t, f.Services["postgres"].Healthcheck)
	for name, s := range f.Services {
		if name != "n8n" {
			require.Empty(t, s.Profiles, "%s starts without a profile", name)
		}
	}

	require.Equal(t, []string{"ingest", "migrate"}, f.Services["migrate"].Command)
	require.Equal(t, "service_healthy", f.Services["migrate"].DependsOn["postgres"].Condition)
	for name, cmd := range map[string]string{"ingest": "ingest", "worker": "worker"} {
		s := f.Services[name]
		require.Equal(t, []string{cmd}, s.Command)
		require.Equal(t, "service_completed_successfully", s.DependsOn["migrate"].Condition, "%s starts after the migrations", name)
	}
	for _, name := range []string{"migrate", "ingest", "worker"} {
		s := f.Services[name]
		require.True(t, s.ReadOnly, name)
		require.NotEmpty(t, s.User, name)
		require.NotEqual(t, "0", s.User, name)
		require.Equal(t, []string{"ALL"}, s.CapDrop, name)
		require.Equal(t, "/etc/hookgate/hookgate.yaml", s.Env["HOOKGATE_CONFIG"], name)
		for k, v := range s.Env {
			if k == "STRIPE_WEBHOOK_SECRET" || k == "GITHUB_WEBHOOK_SECRET" || k == "DEMO_WEBHOOK_SECRET" {
				require.Regexp(t, `^\$\{`+k+`[:?-]`, v, "%s: %s comes from the environment", name, k)
			}
		}
	}
}

// TestComposeN8n: n8n is optional (a profile), pinned to the version
// docs/n8n.md was checked against, healthy when its webhooks can be served,
// and its editor reachable from this host only.
func TestComposeN8n(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../compose.yaml")
	require.NoError(t, err)
	var f struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Profiles    []string          `yaml:"profiles"`
			Ports       []string          `yaml:"ports"`
			Env         map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			DependsOn   map[string]any    `yaml:"depends_on"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f))
	n := f.Services["n8n"]
	require.Equal(t, []string{"n8n"}, n.Profiles, "started only with --profile n8n")
	version := strings.TrimPrefix(n.Image, "docker.n8n.io/n8nio/n8n:")
	require.Regexp(t, `^\d+\.\d+\.\d+$`, version, "a pinned release, not %q", n.Image)
	doc, err := os.ReadFile("../../docs/n8n.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), "n8n "+version, "docs/n8n.md names the version compose runs")
	require.Equal(t, []string{"127.0.0.1:5678:5678"}, n.Ports, "the editor on the loopback interface only")
	require.Equal(t, "5678", n.Env["N8N_PORT"])
	require.Equal(t, "http://n8n:5678/", n.Env["WEBHOOK_URL"], "the address routes reach it at")
	require.Contains(t, strings.Join(n.Healthcheck.Test, " "), "http://127.0.0.1:5678/healthz")
	require.Contains(t, n.Volumes, "n8ndata:/home/node/.n8n", "workflows and credentials outlive the container")
	require.Contains(t, f.Volumes, "n8ndata")
	for _, name := range []string{"migrate", "ingest", "worker"} {
		require.NotContains(t, f.Services[name].DependsOn, "n8n", "%s runs without the n8n profile", name)
		require.Contains(t, f.Services[name].Env, "N8N_WEBHOOK_TOKEN", "%s can authenticate to n8n webhooks", name)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
