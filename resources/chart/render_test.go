// Package chart_test tests the Helm chart in keb/: lint and template with Helm as a Go library, its variables against the binaries', its objects against the test kube-apiserver, its alerts with promtool, and the broker started as its Deployment starts it.
package chart_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, relative to this package.
const chartDir = "keb"

// object is one rendered Kubernetes object.
type object map[string]any

func (o object) kind() string { return str(o["kind"]) }
func (o object) name() string { return str(dig(o, "metadata", "name")) }

func str(v any) string {
	s, _ := v.(string)
	return s
}

// dig walks nested maps.
func dig(v any, path ...string) any {
	if o, ok := v.(object); ok {
		v = map[string]any(o)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// valueSets are the values the chart is rendered with: the defaults, the HA example and the
// sandbox (a trial installation, which the run test deploys).
func valueSets(t *testing.T) map[string]map[string]any {
	t.Helper()
	ha, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", "ha-values.yaml"))
	require.NoError(t, err)
	return map[string]map[string]any{"default": {}, "ha": ha.AsMap(), "sandbox": sandboxValues(t, 18080, 18081, 18090, 18443)}
}

// sandboxValues turn the sandbox on, with the given ports, and replace the catalog and overrides
// by the repository's (through the chart's ConfigMap).
func sandboxValues(t *testing.T, port, statusPort, sandboxPort, tlsPort int) map[string]any {
	t.Helper()
	read := func(path string) map[string]any {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(data, &m))
		return m
	}
	return map[string]any{
		"broker": map[string]any{
			"port": port, "statusPort": statusPort,
			"plans":     read(filepath.Join("..", "plans.yaml")),
			"overrides": read(filepath.Join("..", "overrides.yaml")),
			"env":       map[string]any{"APP_BROKER_POLL_INTERVAL": "200ms"},
		},
		"sandbox": map[string]any{"enabled": true, "port": sandboxPort, "tlsPort": tlsPort},
	}
}

// render is `helm template` with vals as the user's values, in namespace ns: every object of
// every template, hooks included, in file order.
func render(t *testing.T, ns string, vals map[string]any) []object {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "keb", Namespace: ns, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	require.NoError(t, err)
	files, err := engine.Render(ch, rv)
	require.NoError(t, err)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []object
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		for _, doc := range splitYAML(files[n]) {
			var o object
			require.NoError(t, yaml.Unmarshal([]byte(doc), &o), "%s:\n%s", n, doc)
			if len(o) > 0 {
				out = append(out, o)
			}
		}
	}
	return out
}

// splitYAML splits a multi-document YAML stream at its `---` lines.
func splitYAML(s string) []string {
	var docs []string
	var cur bytes.Buffer
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line + "\n")
	}
	return append(docs, cur.String())
}

// find returns the rendered object of kind and name, failing the test without it.
func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// containers are the containers of a workload (Deployment or Job).
func containers(o object) []map[string]any {
	var out []map[string]any
	for _, c := range list(dig(o, "spec", "template", "spec", "containers")) {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// env is a container's variables: name -> the entry (value or valueFrom).
func env(c map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, e := range list(c["env"]) {
		m := e.(map[string]any)
		out[str(m["name"])] = m
	}
	return out
}
