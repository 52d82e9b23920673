package chart_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/kyma-project/kyma-environment-broker/internal/app"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	provisionerconfig "github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// helm lint finds nothing above info with each value set.
func TestHelmLint(t *testing.T) {
	for name, vals := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			l := lint.AllWithKubeVersion(chartDir, vals, "keb-system", nil)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
			assert.Less(t, l.HighestSeverity, support.WarningSev)
		})
	}
}

// The defaults are a production broker: three replicas on PostgreSQL with credentials from
// Secrets, probes on a status port apart from the OSB port, non-root and read-only, the migration
// hook, the sandbox off and every monitoring object.
func TestDefaultsArePostgresHAWithoutSandbox(t *testing.T) {
	objs := render(t, "keb-system", nil)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.kind()+"/"+o.name())
	}
	sort.Strings(kinds)
	assert.Equal(t, []string{
		"ConfigMap/keb-dashboard", "Deployment/keb", "Job/keb-migrate", "NetworkPolicy/keb", "PodDisruptionBudget/keb",
		"PrometheusRule/keb", "Service/keb", "Service/keb-status", "ServiceAccount/keb", "ServiceMonitor/keb",
	}, kinds)

	dep := find(t, objs, "Deployment", "keb")
	assert.EqualValues(t, 3, dig(dep, "spec", "replicas"))
	assert.NotNil(t, dig(dep, "spec", "template", "spec", "affinity", "podAntiAffinity"))
	assert.Equal(t, true, dig(dep, "spec", "template", "spec", "securityContext", "runAsNonRoot"))
	c := containers(dep)[0]
	assert.Equal(t, true, dig(c, "securityContext", "readOnlyRootFilesystem"))
	assert.Equal(t, false, dig(c, "securityContext", "allowPrivilegeEscalation"))
	assert.NotNil(t, dig(c, "resources", "requests", "cpu"))
	assert.Equal(t, "/healthz", dig(c, "livenessProbe", "httpGet", "path"))
	assert.Equal(t, "/readyz", dig(c, "readinessProbe", "httpGet", "path"))
	assert.Equal(t, "status", dig(c, "livenessProbe", "httpGet", "port"))
	assert.Equal(t, "status", dig(c, "readinessProbe", "httpGet", "port"))
	ports := map[string]any{}
	for _, p := range list(c["ports"]) {
		ports[str(dig(p, "name"))] = dig(p, "containerPort")
	}
	assert.NotEqual(t, ports["http"], ports["status"], "probes on a port of their own")

	e := env(c)
	assert.Equal(t, "false", e["APP_SANDBOX_ENABLED"]["value"])
	assert.Equal(t, "postgres", e["APP_DATABASE_DRIVER"]["value"])
	for _, secret := range []string{"APP_DATABASE_URL", "APP_DATABASE_SECRET_KEY", "APP_BROKER_USERNAME", "APP_BROKER_PASSWORD"} {
		assert.NotNil(t, dig(e[secret], "valueFrom", "secretKeyRef"), "%s from a Secret", secret)
		assert.Nil(t, e[secret]["value"], "%s never in plain text", secret)
	}

	job := find(t, objs, "Job", "keb-migrate")
	assert.Equal(t, "pre-install,pre-upgrade", dig(job, "metadata", "annotations", "helm.sh/hook"))
	jc := containers(job)[0]
	assert.Equal(t, []any{"/broker"}, jc["command"])
	assert.Equal(t, []any{"migrate", "up"}, jc["args"])
	assert.NotNil(t, dig(env(jc)["APP_DATABASE_URL"], "valueFrom", "secretKeyRef"))
}

// The HA example adds the standalone provisioner, the ingress and the Runtime Agent with its
// RBAC and CRDs; required anti-affinity and the PDB follow the values.
func TestHAValues(t *testing.T) {
	objs := render(t, "keb-system", valueSets(t)["ha"])
	dep := find(t, objs, "Deployment", "keb")
	assert.EqualValues(t, 5, dig(dep, "spec", "replicas"))
	assert.NotNil(t, dig(dep, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"))
	assert.EqualValues(t, 3, dig(find(t, objs, "PodDisruptionBudget", "keb"), "spec", "minAvailable"))
	e := env(containers(dep)[0])
	assert.Equal(t, "http://keb-provisioner:3000/graphql", e["APP_PROVISIONER_URL"]["value"])
	assert.Equal(t, "16", e["APP_ENGINE_WORKERS"]["value"], "broker.env reaches the container")
	assert.Equal(t, "keb-edp", dig(e["APP_EDP_CLIENT_SECRET"], "valueFrom", "secretKeyRef", "name"))
	find(t, objs, "Deployment", "keb-provisioner")
	find(t, objs, "Service", "keb-provisioner")
	find(t, objs, "Ingress", "keb")
	agent := find(t, objs, "Deployment", "keb-runtime-agent")
	assert.EqualValues(t, 2, dig(agent, "spec", "replicas"))
	find(t, objs, "ClusterRole", "keb-runtime-agent")
	find(t, objs, "CustomResourceDefinition", "compassconnections.compass.kyma-project.io")
	find(t, objs, "CustomResourceDefinition", "applications.applicationconnector.kyma-project.io")
	for _, o := range objs {
		if o.kind() == "Role" || o.kind() == "ClusterRole" {
			for _, r := range list(dig(o, "rules")) {
				for _, v := range list(dig(r, "verbs")) {
					assert.NotEqual(t, "*", v, "%s %s: no wildcard verbs", o.kind(), o.name())
				}
				for _, res := range list(dig(r, "resources")) {
					assert.NotEqual(t, "*", res, "%s %s: no wildcard resources", o.kind(), o.name())
				}
			}
		}
	}
}

// In a runtime's cluster the chart renders the Runtime Agent alone: its Deployment, ServiceAccount,
// RBAC and CRDs, nothing of the broker.
func TestRuntimeAgentAlone(t *testing.T) {
	objs := render(t, "compass-system", map[string]any{"broker": map[string]any{"enabled": false}, "runtimeAgent": map[string]any{"enabled": true}})
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.kind()]++
		if o.kind() == "CustomResourceDefinition" {
			continue // as in resources/crds
		}
		assert.Equal(t, "runtime-agent", dig(o, "metadata", "labels", "app.kubernetes.io/component"), "%s %s", o.kind(), o.name())
	}
	assert.Equal(t, map[string]int{"CustomResourceDefinition": 2, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 5, "RoleBinding": 5, "Deployment": 1}, kinds)
}

// The agent's CRDs in the chart are the repository's (resources/crds), byte for byte.
func TestChartCRDsAreTheRepositoryCRDs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "files", "crds", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	for _, f := range files {
		got, err := os.ReadFile(f)
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join("..", "crds", filepath.Base(f)))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%s differs from resources/crds: copy it again", f)
	}
}

// readVariables lists the APP_* variables a process reads, from the envconfig tags of the
// structures it reads (as docs/config_test.go does for configuration.md).
func readVariables(t *testing.T, specs ...struct {
	prefix string
	spec   any
}) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range specs {
		var buf bytes.Buffer
		require.NoError(t, envconfig.Usagef(s.prefix, s.spec, &buf, "{{range .}}{{.Key}}\n{{end}}"))
		for _, k := range strings.Fields(buf.String()) {
			out[k] = true
		}
	}
	return out
}

type spec = struct {
	prefix string
	spec   any
}

// brokerVariables are the broker's: app.Load's parts, externals', the embedded provisioner's,
// the Director's and logging's.
func brokerVariables(t *testing.T) map[string]bool {
	var cfg app.Config
	specs := []spec{{"APP", &cfg}}
	v := reflect.ValueOf(&cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Tag.Get("ignored") != "true" {
			continue
		}
		if f.Name == "Externals" {
			ev := v.Field(i)
			for j := 0; j < ev.NumField(); j++ {
				if ev.Field(j).Kind() == reflect.Struct {
					specs = append(specs, spec{"APP", ev.Field(j).Addr().Interface()})
				}
			}
			continue
		}
		prefix := "APP"
		if f.Name == "Runtime" {
			prefix = "APP_RUNTIME"
		}
		specs = append(specs, spec{prefix, v.Field(i).Addr().Interface()})
	}
	specs = append(specs, spec{"APP", &provisionerconfig.Config{}}, spec{"APP", &director.Config{}}, spec{"APP", &logging.Config{}})
	return readVariables(t, specs...)
}

// variablesOf maps each command the chart runs to the variables it reads (cmd/provisioner's
// run, runtimeagent.LoadConfig).
func variablesOf(t *testing.T) map[string]map[string]bool {
	return map[string]map[string]bool{
		"/broker": brokerVariables(t),
		"/provisioner": readVariables(t, spec{"APP", &provisionerconfig.Config{}}, spec{"APP", &driver.Config{}}, spec{"APP", &engine.Config{}},
			spec{"APP", &infrastructure.Config{}}, spec{"APP", &director.Config{}}, spec{"APP", &logging.Config{}}),
		"/runtime-agent": readVariables(t, spec{"APP", &runtimeagent.Config{}}, spec{"APP", &logging.Config{}}),
	}
}

// unreadVariables lists the APP_* variables the rendered containers set that their command does
// not read.
func unreadVariables(t *testing.T, objs []object, vars map[string]map[string]bool) []string {
	var bad []string
	for _, o := range objs {
		for _, c := range containers(o) {
			cmd := list(c["command"])
			require.NotEmpty(t, cmd, "%s %s: the chart names the command", o.kind(), o.name())
			read, ok := vars[str(cmd[0])]
			require.True(t, ok, "%s %s runs %v, which the test does not know", o.kind(), o.name(), cmd)
			for name := range env(c) {
				if strings.HasPrefix(name, "APP_") && !read[name] {
					bad = append(bad, fmt.Sprintf("%s %s (%s): %s", o.kind(), o.name(), cmd[0], name))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// No value names a variable its binary does not read: every APP_* variable every container gets,
// from the templates and from broker.env, provisioner.env and runtimeAgent.env, is one of the
// envconfig tags of what that command reads.
func TestChartSetsOnlyVariablesTheBinariesRead(t *testing.T) {
	vars := variablesOf(t)
	require.True(t, vars["/broker"]["APP_STATUS_ADDRESS"])
	for name, vals := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, unreadVariables(t, render(t, "keb-system", vals), vars))
		})
	}
	// A misspelt variable is caught.
	bad := unreadVariables(t, render(t, "keb-system", map[string]any{
		"broker":      map[string]any{"env": map[string]any{"APP_ENGINE_WORKER": "4"}},
		"provisioner": map[string]any{"enabled": true, "env": map[string]any{"APP_BROKER_USERNAME": "x"}},
	}), vars)
	assert.Equal(t, []string{"Deployment keb (/broker): APP_ENGINE_WORKER", "Deployment keb-provisioner (/provisioner): APP_BROKER_USERNAME"}, bad)
}

var metricName = regexp.MustCompile(`\b(keb_[a-z_]+|go_[a-z_]+|process_[a-z_]+|up|scrape_duration_seconds)\b`)

// metricsUsed are the metric names the dashboard's and the alerts' queries use (histogram series
// by their family's name).
func metricsUsed(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(where, expr string) {
		for _, m := range metricName.FindAllString(expr, -1) {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if strings.HasSuffix(m, suffix) && strings.Contains(m, "_seconds") {
					m = strings.TrimSuffix(m, suffix)
				}
			}
			out[m] = append(out[m], where)
		}
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboards", "keb.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add("dashboard: "+p.Title, tg.Expr)
		}
	}
	for _, r := range alertRules(t, render(t, "keb-system", nil)) {
		add("alert: "+str(r["alert"]), str(r["expr"]))
	}
	return out
}

// assumedMetrics are used by the dashboard and the alerts but not (yet) exported by the broker
// built here: HTTP request metrics by route and the build information (issue 37's metrics), and
// Prometheus's own series about the scrape. (Certificate expiry is exported: the chart's run
// test turns the sandbox on, whose CA and TLS certificate the broker holds.)
var assumedMetrics = map[string]bool{
	"keb_http_requests_total": true, "keb_http_request_duration_seconds": true, "keb_build_info": true,
	"up": true, "scrape_duration_seconds": true,
}

// alertRules are the rules of the rendered PrometheusRule.
func alertRules(t *testing.T, objs []object) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, g := range list(dig(find(t, objs, "PrometheusRule", "keb"), "spec", "groups")) {
		for _, r := range list(dig(g, "rules")) {
			out = append(out, r.(map[string]any))
		}
	}
	return out
}

// The dashboard is valid JSON with the four sections and every panel has a query.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboards", "keb.json"))
	require.NoError(t, err)
	var dash map[string]any
	require.NoError(t, json.Unmarshal(data, &dash))
	var rows []string
	for _, p := range list(dash["panels"]) {
		if str(dig(p, "type")) == "row" {
			rows = append(rows, str(dig(p, "title")))
			continue
		}
		assert.NotEmpty(t, list(dig(p, "targets")), "panel %s", dig(p, "title"))
	}
	for _, want := range []string{"OSB API", "Engine", "External systems", "Database"} {
		assert.Contains(t, rows, want)
	}
	cm := find(t, render(t, "keb-system", nil), "ConfigMap", "keb-dashboard")
	assert.JSONEq(t, string(data), str(dig(cm, "data", "keb.json")))
	assert.Equal(t, "1", dig(cm, "metadata", "labels", "grafana_dashboard"))
}

// The image has every command the chart runs, built by the Dockerfile, and keeps the sandbox off;
// the variables it sets are the broker's.
func TestDockerfileBuildsWhatTheChartRuns(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	require.NoError(t, err)
	dockerfile := string(data)
	built := regexp.MustCompile(`for cmd in ([a-z\- ]+); do`).FindStringSubmatch(dockerfile)
	require.NotNil(t, built, "the Dockerfile's build loop")
	commands := map[string]bool{}
	for _, vals := range valueSets(t) {
		for _, o := range render(t, "keb-system", vals) {
			for _, c := range containers(o) {
				commands[str(list(c["command"])[0])] = true
			}
		}
	}
	require.Len(t, commands, 3, "broker, provisioner, runtime-agent")
	commands["/sandbox"] = true // the standalone stand-ins (docs/user/sandbox.md)
	for cmd := range commands {
		name := strings.TrimPrefix(cmd, "/")
		assert.Contains(t, strings.Fields(built[1]), name, "the Dockerfile builds %s", name)
		assert.Contains(t, dockerfile, fmt.Sprintf("COPY --from=build /out/%s /%s\n", name, name), "the image has %s", cmd)
	}
	envLine := regexp.MustCompile(`(?s)\nENV (.*?[^\\])\n`).FindStringSubmatch(dockerfile)
	require.NotNil(t, envLine)
	vars := brokerVariables(t)
	set := map[string]string{}
	for _, kv := range strings.Fields(strings.ReplaceAll(envLine[1], "\\\n", " ")) {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, kv)
		assert.True(t, vars[k], "the image sets %s, which the broker does not read", k)
		set[k] = v
	}
	assert.Equal(t, "false", set["APP_SANDBOX_ENABLED"], "the sandbox is off in the image")
}
