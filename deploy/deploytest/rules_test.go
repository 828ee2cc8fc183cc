package deploytest

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/template"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// parseRules parses a rule file as Prometheus does.
func parseRules(path string) (*rulefmt.RuleGroups, []error) {
	return rulefmt.ParseFile(path, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
}

// Paths from this package to what it tests.
const (
	rulesFile     = "../prometheus/alerts.yaml"
	rulesTestFile = "../prometheus/alerts_test.yaml"
	operationsDoc = "../../docs/operations.md"
)

// loadRules parses the rule file as Prometheus does, unknown fields rejected.
// It also parses every rule's expression as PromQL, so a typo fails every
// test that loads the rules (TestRuleLoadingRejectsABadExpression).
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := parseRules(rulesFile)
	require.Empty(t, errs, "%s", rulesFile)
	require.NotEmpty(t, groups.Groups)
	return groups
}

// TestAlertsHaveRunbooks: every alert links to a section of the operations
// guide that exists, and says how bad it is.
func TestAlertsHaveRunbooks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	anchors := markdownAnchors(string(doc))
	const prefix = "https://github.com/hookgate/hookgate/blob/main/docs/operations.md#"
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			url := r.Annotations["runbook_url"]
			require.True(t, strings.HasPrefix(url, prefix), "%s: runbook_url %q is not a section of docs/operations.md", r.Alert, url)
			require.Contains(t, anchors, strings.TrimPrefix(url, prefix), "%s: docs/operations.md has no such section", r.Alert)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], "%s: severity", r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
		}
	}
}

// markdownAnchors returns the anchors GitHub gives the headings of doc.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

// The unit test file, in promtool's format (the parts of it used here).
type ruleTests struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []struct {
		Name        string         `yaml:"name"`
		Interval    model.Duration `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTests []alertTest `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

type alertTest struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []struct {
		ExpLabels      map[string]string `yaml:"exp_labels"`
		ExpAnnotations map[string]string `yaml:"exp_annotations"`
	} `yaml:"exp_alerts"`
}

// TestAlertRules runs deploy/prometheus/alerts_test.yaml the way `promtool
// test rules` does: the input series are loaded, the alerting rules are
// evaluated at each evaluation interval with the same PromQL engine and
// template expander Prometheus uses, pending alerts fire once their `for`
// has passed, and at each eval_time the firing alerts of the named rule,
// labels and annotations, must be exactly the expected ones.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	var file ruleTests
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&file))
	require.Equal(t, []string{filepath.Base(rulesFile)}, file.RuleFiles)
	evalInterval := time.Duration(file.EvaluationInterval)
	require.Positive(t, evalInterval)

	var rules []rulefmt.Rule
	for _, g := range loadRules(t).Groups {
		rules = append(rules, g.Rules...)
	}
	tested := map[string]map[bool]bool{} // alert -> fired? -> seen
	for _, tg := range file.Tests {
		t.Run(tg.Name, func(t *testing.T) {
			st := &memStorage{}
			for _, s := range tg.InputSeries {
				st.load(t, s.Series, s.Values, time.Duration(tg.Interval))
			}
			ctx := context.Background()
			ng := newEngine()
			for _, at := range tg.AlertRuleTests {
				d := time.Duration(at.EvalTime)
				require.Zero(t, d%evalInterval, "eval_time %s is not a multiple of the evaluation interval", d)
				if tested[at.Alertname] == nil {
					tested[at.Alertname] = map[bool]bool{}
				}
				tested[at.Alertname][len(at.ExpAlerts) > 0] = true

				var got, want []firing
				for _, r := range rules {
					if r.Alert != at.Alertname {
						continue
					}
					// Whether an alert fires at d depends only on the
					// evaluations of the last `for`: one active since
					// earlier is active since d-for as far as firing goes.
					hold := time.Duration(r.For)
					active := map[uint64]*alert{}
					var ts time.Time
					for step := max(0, (d-hold)/evalInterval*evalInterval); step <= d; step += evalInterval {
						ts = time.Unix(0, 0).UTC().Add(step)
						evalAlert(t, ctx, ng, st, r, ts, active)
					}
					for _, a := range active {
						if ts.Sub(a.activeAt) >= hold {
							got = append(got, firing{Labels: a.labels, Annotations: a.annotations})
						}
					}
				}
				for _, e := range at.ExpAlerts {
					l := maps.Clone(e.ExpLabels)
					if l == nil {
						l = map[string]string{}
					}
					l[labels.AlertName] = at.Alertname
					want = append(want, firing{Labels: l, Annotations: cmpMap(e.ExpAnnotations)})
				}
				require.ElementsMatch(t, want, got, "alert %s at %s", at.Alertname, d)
			}
		})
	}

	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		require.True(t, tested[r.Alert][true], "%s: no test where it fires", r.Alert)
		require.True(t, tested[r.Alert][false], "%s: no test where it stays silent", r.Alert)
	}
}

// firing is an alert as the test compares it.
type firing struct {
	Labels      map[string]string
	Annotations map[string]string
}

func cmpMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// alert is an active (pending or firing) alert of one rule.
type alert struct {
	labels, annotations map[string]string
	activeAt            time.Time
}

// evalAlert evaluates r at ts and updates its active alerts as Prometheus's
// AlertingRule.Eval does: new label sets become active at ts, those that
// stay keep their activation time, those that vanish are dropped.
func evalAlert(t *testing.T, ctx context.Context, ng *promql.Engine, st *memStorage, r rulefmt.Rule, ts time.Time, active map[uint64]*alert) {
	t.Helper()
	query := func(ctx context.Context, q string, ts time.Time) (promql.Vector, error) {
		return instant(ctx, ng, st, q, ts)
	}
	vec, err := query(ctx, r.Expr, ts)
	require.NoError(t, err, "%s at %s", r.Alert, ts)
	seen := map[uint64]bool{}
	for _, smpl := range vec {
		data := template.AlertTemplateData(smpl.Metric.Map(), nil, "", smpl)
		expand := func(text string) string {
			defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
			out, err := template.NewTemplateExpander(ctx, defs+text, "__alert_"+r.Alert, data,
				model.Time(timestamp.FromTime(ts)), template.QueryFunc(query), nil, nil).Expand()
			require.NoError(t, err, "%s: expanding %q", r.Alert, text)
			return out
		}
		lb := labels.NewBuilder(smpl.Metric)
		lb.Del(model.MetricNameLabel)
		for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
			lb.Set(k, expand(r.Labels[k]))
		}
		lb.Set(labels.AlertName, r.Alert)
		lset := lb.Labels()
		ann := map[string]string{}
		for k, v := range r.Annotations {
			ann[k] = expand(v)
		}
		h := lset.Hash()
		require.False(t, seen[h], "%s: duplicate alert label set %s", r.Alert, lset)
		seen[h] = true
		if a, ok := active[h]; ok {
			a.annotations = ann
			continue
		}
		active[h] = &alert{labels: lset.Map(), annotations: ann, activeAt: ts}
	}
	for h := range active {
		if !seen[h] {
			delete(active, h)
		}
	}
}

// TestRuleLoadingRejectsABadExpression: loading the rules parses each
// expression as PromQL, so a typo in any of them fails the tests that load
// them, not Prometheus's rule loading. Each expression of the rule file is
// broken in turn in a copy, which must then be refused naming its rule.
func TestRuleLoadingRejectsABadExpression(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(src, &doc))
	var exprs []*yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "expr" {
				exprs = append(exprs, n.Content[i+1])
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	require.NotEmpty(t, exprs)
	for i, e := range exprs {
		good := e.Value
		e.Value = good + " )"
		broken, err := yaml.Marshal(&doc)
		e.Value = good
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "alerts.yaml")
		require.NoError(t, os.WriteFile(path, broken, 0o600))
		_, errs := parseRules(path)
		require.NotEmpty(t, errs, "expression %d (%q) broken, yet the rules load", i, good)
	}
}
