package deploytest

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hookgate/hookgate/internal/config"
)

const twoCellsDir = "../overlays/two-cells"

// TestKubernetesTwoCells: the two-cell overlay builds; its config is valid
// and puts a provider in each of two cells; ingest, the worker and the
// migrate Job read each cell's URL from the cell's own Secret and no
// DATABASE_URL; and the migrate Job mounts the config that names the cells.
func TestKubernetesTwoCells(t *testing.T) {
	t.Parallel()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), twoCellsDir)
	require.NoError(t, err, "kustomize build %s", twoCellsDir)
	containers := map[string]corev1.PodSpec{}
	var cm *corev1.ConfigMap
	for _, r := range res.Resources() {
		raw, err := r.MarshalJSON()
		require.NoError(t, err)
		decode := func(v any) {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(v), "%s %s", r.GetKind(), r.GetName())
		}
		switch r.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			decode(d)
			containers[d.Name] = d.Spec.Template.Spec
		case "Job":
			j := &batchv1.Job{}
			decode(j)
			containers[j.Name] = j.Spec.Template.Spec
		case "ConfigMap":
			cm = &corev1.ConfigMap{}
			decode(cm)
		}
	}
	require.NotNil(t, cm)
	path := t.TempDir() + "/hookgate.yaml"
	require.NoError(t, os.WriteFile(path, []byte(cm.Data["hookgate.yaml"]), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err, "the overlay's hookgate.yaml is a valid config")
	require.Len(t, cfg.Cells, 2)
	cells := map[string]bool{}
	for _, p := range cfg.Providers {
		cells[cfg.ProviderCell(p.Name)] = true
	}
	require.Equal(t, map[string]bool{"eu": true, "us": true}, cells, "a provider in each cell")

	for _, name := range []string{"hookgate-ingest", "hookgate-worker", "hookgate-migrate"} {
		pod, ok := containers[name]
		require.True(t, ok, name)
		c := pod.Containers[0]
		require.NotContains(t, envNames(c), "DATABASE_URL", "%s: not used with cells:", name)
		secrets := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name
			}
		}
		for _, cell := range cfg.Cells {
			require.Contains(t, secrets, cell.DatabaseURLEnv, "%s reads cell %s's URL", name, cell.Name)
			require.Equal(t, "hookgate-database-"+cell.Name, secrets[cell.DatabaseURLEnv])
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		require.Equal(t, "/etc/hookgate/hookgate.yaml", env["HOOKGATE_CONFIG"], name)
		mounted := false
		for _, v := range pod.Volumes {
			if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
				mounted = true
			}
		}
		require.True(t, mounted, "%s mounts the config %s", name, cm.Name)
	}
}
