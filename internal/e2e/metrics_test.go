package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hookgate/hookgate/internal/claim"
)

// What operators load into Prometheus and Grafana.
const (
	alertRules = "../../deploy/prometheus/alerts.yaml"
	dashboard  = "../../deploy/grafana/hookgate.json"
)

// synthetic are series Prometheus makes itself rather than scraping them.
var synthetic = map[string]bool{"up": true}

// TestDeployedQueriesNameExposedMetrics: every PromQL expression in the
// alert rules and the dashboard parses, and every metric they name is
// exposed by the real binaries from the moment they start, before any
// traffic. A renamed metric, or a counter that exists only after its first
// increment, fails here rather than leaving an alert silent. Then, after
// traffic of every kind, no hookgate metric has appeared that was not there
// at the start.
func TestDeployedQueriesNameExposedMetrics(t *testing.T) {
	t.Parallel()
	exprs := append(ruleExprs(t), dashboardExprs(t)...)
	require.NotEmpty(t, exprs)
	p := parser.NewParser(parser.Options{})
	named := map[string][]string{} // metric -> expressions naming it
	for _, e := range exprs {
		ast, err := p.ParseExpr(grafanaVars.ReplaceAllString(e, "5m"))
		require.NoError(t, err, "%s", e)
		parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				require.NotEmpty(t, vs.Name, "selector without a metric name in %s", e)
				named[vs.Name] = append(named[vs.Name], e)
			}
			return nil
		})
	}

	s := newStack(t, []route{
		{name: "ship", events: []string{"order.paid"}},
		{name: "ledger", events: []string{"*"}, businessKey: []string{"json:data.id"}},
	})
	// Reconciliation's metrics exist for the providers that reconcile: the
	// GitHub provider does, against an API that is not there (its runs
	// fail, which is counted too).
	cfg, err := os.ReadFile(s.cfgPath)
	require.NoError(t, err)
	githubLine := "    secrets_env: [E2E_GITHUB_SECRET]\n"
	require.Contains(t, string(cfg), githubLine)
	cfg = []byte(strings.Replace(string(cfg), githubLine, githubLine+
		"    reconcile: {token_env: E2E_GITHUB_TOKEN, hook: repos/acme/shop/hooks/1, every: 1h, api_base: 'http://127.0.0.1:1'}\n", 1))
	require.NoError(t, os.WriteFile(s.cfgPath, cfg, 0o600))
	s.env = append(s.env, "E2E_GITHUB_TOKEN=ghp_e2e_metrics_token_0123456789")
	ingest, worker := s.ingest(), s.worker()
	atStart := exposed(t, ingest, worker)
	for name, in := range named {
		if synthetic[name] {
			continue
		}
		require.True(t, atStart[name], "%s is named by %q but neither binary exposes it at start", name, in[0])
	}

	// Traffic of every kind ingest counts, and deliveries.
	e := event{id: "evt_metrics", typ: "order.paid"}
	s.claimed(ingest, e)
	require.True(t, s.send(ingest, e, providerSecret).duplicate)
	require.Equal(t, http.StatusUnauthorized, s.send(ingest, event{id: "evt_forged", typ: "order.paid"}, routeSecret).status)
	s.waitStatus(e.id, claim.Completed, settle)
	after := exposed(t, ingest, worker)
	for name := range after {
		if strings.HasPrefix(name, "hookgate_") {
			require.True(t, atStart[name], "%s appeared only after traffic: create its series at start", name)
		}
	}
}

// grafanaVars are the dashboard's interval variables, which PromQL cannot parse.
var grafanaVars = regexp.MustCompile(`\$__(rate_interval|interval|range)`)

func ruleExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(alertRules)
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &f))
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}

// panel is the part of a Grafana panel that holds queries; rows nest panels.
type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboard)
	require.NoError(t, err)
	var d struct {
		Panels []panel `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	var out []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				require.NotEmpty(t, tg.Expr, "panel %q has a target without expr", p.Title)
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// exposed scrapes each process's /metrics and returns the names of the
// series they expose: for histograms and summaries, the _bucket, _sum and
// _count series too.
func exposed(t *testing.T, procs ...*proc) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, p := range procs {
		resp, err := http.Get(p.url + "/metrics")
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s /metrics: %s", p.name, raw)
		for _, line := range strings.Split(string(raw), "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
				out[f[2]] = true
				if slices.Contains([]string{"histogram", "summary"}, f[3]) {
					out[f[2]+"_sum"], out[f[2]+"_count"] = true, true
					if f[3] == "histogram" {
						out[f[2]+"_bucket"] = true
					}
				}
			}
		}
	}
	return out
}
