package deploytest

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/hookgate/hookgate/internal/config"
)

const kustomizeDir = "../kubernetes"

// objects is the built base, each object decoded into its API type.
type objects struct {
	deployments  map[string]*appsv1.Deployment
	services     map[string]*corev1.Service
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	jobs         map[string]*batchv1.Job
	configMaps   map[string]*corev1.ConfigMap
	policies     map[string]*networkingv1.NetworkPolicy
	monitors     map[string]*monitoringv1.ServiceMonitor
	rules        map[string]*monitoringv1.PrometheusRule
	namespaces   map[string]*corev1.Namespace
	containersOf map[string][]corev1.Container // workload name -> its containers
}

// build runs `kustomize build deploy/kubernetes` and decodes every object
// strictly: a field its API type does not have (a typo, a field at the
// wrong level) fails the test, as it would fail `kubectl apply`.
func build(t *testing.T) objects {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kustomizeDir)
	require.NoError(t, err, "kustomize build %s", kustomizeDir)
	o := objects{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		jobs: map[string]*batchv1.Job{}, configMaps: map[string]*corev1.ConfigMap{},
		policies: map[string]*networkingv1.NetworkPolicy{}, monitors: map[string]*monitoringv1.ServiceMonitor{},
		rules: map[string]*monitoringv1.PrometheusRule{}, namespaces: map[string]*corev1.Namespace{},
		containersOf: map[string][]corev1.Container{},
	}
	for _, r := range res.Resources() {
		raw, err := r.MarshalJSON()
		require.NoError(t, err)
		kind, name := r.GetKind(), r.GetName()
		into := func(v any) {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(v), "%s %s", kind, name)
		}
		gv := r.GetApiVersion()
		switch kind + " " + gv {
		case "Deployment apps/v1":
			v := &appsv1.Deployment{}
			into(v)
			o.deployments[name] = v
			o.containersOf[name] = append(v.Spec.Template.Spec.InitContainers, v.Spec.Template.Spec.Containers...)
		case "Service v1":
			v := &corev1.Service{}
			into(v)
			o.services[name] = v
		case "HorizontalPodAutoscaler autoscaling/v2":
			v := &autoscalingv2.HorizontalPodAutoscaler{}
			into(v)
			o.hpas[name] = v
		case "PodDisruptionBudget policy/v1":
			v := &policyv1.PodDisruptionBudget{}
			into(v)
			o.pdbs[name] = v
		case "Job batch/v1":
			v := &batchv1.Job{}
			into(v)
			o.jobs[name] = v
			o.containersOf[name] = append(v.Spec.Template.Spec.InitContainers, v.Spec.Template.Spec.Containers...)
		case "ConfigMap v1":
			v := &corev1.ConfigMap{}
			into(v)
			o.configMaps[name] = v
		case "NetworkPolicy networking.k8s.io/v1":
			v := &networkingv1.NetworkPolicy{}
			into(v)
			o.policies[name] = v
		case "ServiceMonitor monitoring.coreos.com/v1":
			v := &monitoringv1.ServiceMonitor{}
			into(v)
			o.monitors[name] = v
		case "PrometheusRule monitoring.coreos.com/v1":
			v := &monitoringv1.PrometheusRule{}
			into(v)
			o.rules[name] = v
		case "Namespace v1":
			v := &corev1.Namespace{}
			into(v)
			o.namespaces[name] = v
		default:
			t.Fatalf("%s %s (%s): no test knows this kind; decode and check it here", kind, name, gv)
		}
	}
	return o
}

func TestKubernetesBase(t *testing.T) {
	t.Parallel()
	o := build(t)
	require.Contains(t, o.namespaces, "hookgate")
	require.Len(t, o.configMaps, 1)
	var cm *corev1.ConfigMap
	for _, c := range o.configMaps {
		cm = c
	}
	require.True(t, strings.HasPrefix(cm.Name, "hookgate-config-"), "the ConfigMap's name carries its content hash, so a config change rolls the pods")
	cfgPath := t.TempDir() + "/hookgate.yaml"
	require.NoError(t, os.WriteFile(cfgPath, []byte(cm.Data["hookgate.yaml"]), 0o600))
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err, "the ConfigMap's hookgate.yaml is a valid config")

	servers := map[string]struct {
		port    string
		command string
	}{
		"hookgate-ingest": {port: "http", command: "ingest"},
		"hookgate-worker": {port: "ops", command: "worker"},
	}
	for name, want := range servers {
		t.Run(name, func(t *testing.T) {
			d := o.deployments[name]
			require.NotNil(t, d, "Deployment %s", name)
			require.GreaterOrEqual(t, *d.Spec.Replicas, int32(2))
			ru := d.Spec.Strategy.RollingUpdate
			require.NotNil(t, ru)
			require.Equal(t, intstr.FromInt32(0), *ru.MaxUnavailable, "a rollout never takes a ready pod away before its successor is ready")

			pod := d.Spec.Template.Spec
			requireLockedDown(t, name, pod)
			require.Equal(t, cm.Name, pod.Volumes[0].ConfigMap.Name)
			require.Len(t, pod.Containers, 1)
			c := pod.Containers[0]
			require.Equal(t, []string{want.command}, c.Command)
			require.Equal(t, want.port, c.Ports[0].Name)
			require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
			require.Equal(t, intstr.FromString(want.port), c.ReadinessProbe.HTTPGet.Port)
			require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
			require.Equal(t, intstr.FromString(want.port), c.LivenessProbe.HTTPGet.Port)
			require.False(t, c.Resources.Requests.Cpu().IsZero(), "CPU request (the HPA's base)")
			require.False(t, c.Resources.Requests.Memory().IsZero())
			require.False(t, c.Resources.Limits.Memory().IsZero())
			require.Contains(t, envNames(c), "HOOKGATE_CONFIG")

			grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
			if name == "hookgate-worker" {
				require.Greater(t, grace, cfg.Worker.ShutdownTimeout.D()+10*time.Second,
					"in-flight attempts get worker.shutdown_timeout, then the cancel and the ops server's shutdown")
			} else {
				require.Greater(t, grace, 30*time.Second, "ingest drains in-flight requests for up to 30 s")
			}

			svc := o.services[name]
			require.NotNil(t, svc, "Service %s", name)
			require.True(t, selects(svc.Spec.Selector, d.Spec.Template.Labels))
			require.Equal(t, intstr.FromString(want.port), svc.Spec.Ports[0].TargetPort)

			hpa := o.hpas[name]
			require.NotNil(t, hpa, "HPA %s", name)
			require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
			require.Equal(t, name, hpa.Spec.ScaleTargetRef.Name)
			require.GreaterOrEqual(t, *hpa.Spec.MinReplicas, int32(2))

			pdb := o.pdbs[name]
			require.NotNil(t, pdb, "PDB %s", name)
			require.True(t, selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels))
			require.NotNil(t, pdb.Spec.MinAvailable)
			require.Less(t, pdb.Spec.MinAvailable.IntValue(), int(*hpa.Spec.MinReplicas), "a node drain can always evict one pod")

			sm := o.monitors[name]
			require.NotNil(t, sm, "ServiceMonitor %s", name)
			require.True(t, selects(sm.Spec.Selector.MatchLabels, svc.Labels))
			require.Equal(t, want.port, sm.Spec.Endpoints[0].Port)
			require.Equal(t, "/metrics", sm.Spec.Endpoints[0].Path)
		})
	}

	t.Run("migrate job", func(t *testing.T) {
		j := o.jobs["hookgate-migrate"]
		require.NotNil(t, j)
		pod := j.Spec.Template.Spec
		requireLockedDown(t, j.Name, pod)
		require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
		require.Equal(t, []string{"ingest", "migrate"}, pod.Containers[0].Command,
			"migrate takes an advisory lock: safe beside running replicas and a second Job")
		require.EqualValues(t, 1, *j.Spec.Parallelism)
		require.Contains(t, envNames(pod.Containers[0]), "DATABASE_URL")
	})

	t.Run("worker ops port stays inside", func(t *testing.T) {
		np := o.policies["hookgate-worker-ops"]
		require.NotNil(t, np)
		require.True(t, selects(np.Spec.PodSelector.MatchLabels, o.deployments["hookgate-worker"].Spec.Template.Labels))
		require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
		for _, rule := range np.Spec.Ingress {
			require.NotEmpty(t, rule.From, "no rule admits every source")
			for _, peer := range rule.From {
				require.Nil(t, peer.IPBlock, "no address range outside the cluster")
				if peer.NamespaceSelector != nil {
					require.NotEmpty(t, peer.NamespaceSelector.MatchLabels, "not every namespace")
				}
			}
		}
	})

	t.Run("provider secret files are mounted into ingest, whole", func(t *testing.T) {
		pod := o.deployments["hookgate-ingest"].Spec.Template.Spec
		var mountPath string
		for _, v := range pod.Volumes {
			if v.Secret != nil && v.Secret.SecretName == "hookgate-provider-secrets" {
				for _, m := range pod.Containers[0].VolumeMounts {
					if m.Name == v.Name {
						require.Empty(t, m.SubPath, "a subPath mount never sees the Secret change")
						require.True(t, m.ReadOnly)
						mountPath = m.MountPath
					}
				}
				require.NotNil(t, pod.SecurityContext.FSGroup, "the non-root user reads the files through fsGroup")
				require.Equal(t, int32(0o440), *v.Secret.DefaultMode)
			}
		}
		require.NotEmpty(t, mountPath, "ingest mounts the Secret hookgate-provider-secrets")
		files := 0
		for _, p := range cfg.Providers {
			for _, f := range p.SecretsFile {
				require.True(t, strings.HasPrefix(f, mountPath+"/"), "%s is under the mount %s", f, mountPath)
				files++
			}
		}
		require.NotZero(t, files, "the base config reads a secret from a file")
		for _, v := range o.deployments["hookgate-worker"].Spec.Template.Spec.Volumes {
			require.Nil(t, v.Secret, "the worker never verifies, so never sees the provider secrets")
		}
	})

	t.Run("secrets by name only", func(t *testing.T) {
		require.NotEmpty(t, o.containersOf)
		for workload, cs := range o.containersOf {
			for _, c := range cs {
				for _, e := range c.Env {
					if e.Value != "" {
						require.NotRegexp(t, `(?i)secret|password|token|key|database_url`, e.Name,
							"%s: %s has an inline value; reference a Secret", workload, e.Name)
						require.NotContains(t, e.Value, "://", "%s: %s looks like a URL with credentials", workload, e.Name)
					}
				}
				for _, ef := range c.EnvFrom {
					require.NotNil(t, ef.SecretRef, "%s: envFrom is for Secrets", workload)
				}
			}
		}
		// Every variable the config names is a key of a referenced Secret,
		// never a literal.
		for _, p := range cfg.Providers {
			for _, v := range p.SecretsEnv {
				require.NotContains(t, cm.Data["hookgate.yaml"], v+"=")
			}
		}
	})
}

// requireLockedDown: non-root, read-only root filesystem, no privilege
// escalation or capabilities, and no service-account token (hookgate never
// talks to the Kubernetes API).
func requireLockedDown(t *testing.T, name string, pod corev1.PodSpec) {
	t.Helper()
	require.NotNil(t, pod.AutomountServiceAccountToken, name)
	require.False(t, *pod.AutomountServiceAccountToken, "%s mounts no service-account token", name)
	require.True(t, *pod.SecurityContext.RunAsNonRoot, name)
	require.NotZero(t, *pod.SecurityContext.RunAsUser, name)
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		sc := c.SecurityContext
		require.NotNil(t, sc, "%s/%s", name, c.Name)
		require.True(t, *sc.ReadOnlyRootFilesystem, "%s/%s read-only root", name, c.Name)
		require.False(t, *sc.AllowPrivilegeEscalation, "%s/%s", name, c.Name)
		require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s/%s", name, c.Name)
		require.NotEmpty(t, c.Image, "%s/%s", name, c.Name)
		require.NotContains(t, c.Image, ":latest@", c.Name)
	}
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

// selects reports whether selector matches every label it names in labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestPrometheusRuleCarriesTheAlertRules: the PrometheusRule object holds
// exactly the groups of deploy/prometheus/alerts.yaml, which promtool and
// the rule tests read.
func TestPrometheusRuleCarriesTheAlertRules(t *testing.T) {
	t.Parallel()
	o := build(t)
	pr := o.rules["hookgate"]
	require.NotNil(t, pr)
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var plain monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(raw, &plain))
	require.NotEmpty(t, plain.Groups)
	want, err := json.Marshal(plain)
	require.NoError(t, err)
	got, err := json.Marshal(pr.Spec)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got), "regenerate deploy/kubernetes/prometheusrule.yaml from alerts.yaml")
}
