package deploytest

import (
	"os"
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
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f)) // resolves the anchors and merge keys
	require.ElementsMatch(t, []string{"postgres", "migrate", "ingest", "worker"}, keys(f.Services))
	require.NotEmpty(t, f.Services["postgres"].Healthcheck)

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

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
