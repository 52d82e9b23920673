package chart_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// pod is a container of a rendered workload turned into a process: its command (the image's
// binaries built here), arguments and environment exactly as rendered, Secrets resolved from the
// test's, and its ConfigMap and emptyDir mounts laid out under root (paths in the environment
// that point into a mount follow it there).
type pod struct {
	args []string
	env  []string
	dir  string
}

func podOf(t *testing.T, objs []object, workload object, bins map[string]string, secrets map[string]map[string]string, root string) pod {
	t.Helper()
	cs := containers(workload)
	require.Len(t, cs, 1)
	c := cs[0]
	volumes := map[string]map[string]any{}
	for _, v := range list(dig(workload, "spec", "template", "spec", "volumes")) {
		m := v.(map[string]any)
		volumes[str(m["name"])] = m
	}
	var mounts []string
	for _, vm := range list(c["volumeMounts"]) {
		path := str(dig(vm, "mountPath"))
		vol := volumes[str(dig(vm, "name"))]
		require.NotNil(t, vol, "mount %s has a volume", path)
		dir := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		switch {
		case vol["configMap"] != nil:
			cm := find(t, objs, "ConfigMap", str(dig(vol, "configMap", "name")))
			data, _ := dig(cm, "data").(map[string]any)
			require.NotEmpty(t, data)
			for k, v := range data {
				require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(str(v)), 0o644))
			}
		case vol["emptyDir"] != nil:
		default:
			t.Fatalf("volume %v: the test knows configMap and emptyDir only", vol)
		}
		mounts = append(mounts, path)
	}
	p := pod{dir: filepath.Join(root, "data")}
	require.NoError(t, os.MkdirAll(p.dir, 0o755))
	cmd := list(c["command"])
	bin, ok := bins[str(cmd[0])]
	require.True(t, ok, "no binary for %v", cmd)
	p.args = append(p.args, bin)
	for _, a := range append(cmd[1:], list(c["args"])...) {
		p.args = append(p.args, str(a))
	}
	for _, e := range list(c["env"]) {
		m := e.(map[string]any)
		name, value := str(m["name"]), str(m["value"])
		if ref := dig(m, "valueFrom", "secretKeyRef"); ref != nil {
			secret := secrets[str(dig(ref, "name"))]
			require.NotNil(t, secret, "%s: Secret %v", name, dig(ref, "name"))
			v, ok := secret[str(dig(ref, "key"))]
			require.True(t, ok, "%s: key %v of Secret %v", name, dig(ref, "key"), dig(ref, "name"))
			value = v
		} else {
			require.Nil(t, m["valueFrom"], "%s: the test resolves secretKeyRef only", name)
		}
		for _, mp := range mounts {
			if strings.HasPrefix(value, mp+"/") {
				value = filepath.Join(root, value)
			}
		}
		p.env = append(p.env, name+"="+value)
	}
	// Kubernetes sets HOSTNAME to the pod's name.
	p.env = append(p.env, "HOSTNAME="+workload.name()+"-test")
	return p
}

func (p pod) command(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.args[0], p.args[1:]...)
	cmd.Env, cmd.Dir = p.env, p.dir
	return cmd
}

// untilUsed are label vectors the broker registers but exports only once a sample exists: calls
// an open circuit rejected (internal/clients/clientkit), which a healthy provisioning makes none of.
var untilUsed = map[string]bool{"keb_external_circuit_rejections_total": true}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// The broker binary, started with exactly the command, arguments, environment and files the
// rendered Deployment gives it (after the migration Job's command, as the pre-install hook runs
// it), on the test PostgreSQL: it becomes ready on the status port, serves the catalog of the
// chart's ConfigMap on the OSB port, provisions a runtime through the sandbox the values turn on
// (whose admin endpoints then need the Secret's credentials), and exports the metrics the
// dashboard and the alerts query.
func TestBrokerRunsAsTheDeploymentStartsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the broker")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "broker")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/broker")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ports := freePorts(t, 4)
	objs := render(t, "keb-system", sandboxValues(t, ports[0], ports[1], ports[2], ports[3]))
	user, password, sandboxPassword := "operator", randomHex(t, 12), randomHex(t, 12)
	secrets := map[string]map[string]string{
		"keb-database":           {"url": pgtest.NewDatabase(t), "secretKey": randomHex(t, 16)},
		"keb-broker-credentials": {"username": user, "password": password},
		"keb-sandbox-admin":      {"username": "sandbox", "password": sandboxPassword},
	}
	bins := map[string]string{"/broker": bin}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	job := podOf(t, objs, find(t, objs, "Job", "keb-migrate"), bins, secrets, filepath.Join(dir, "migrate"))
	out, err = job.command(ctx).CombinedOutput()
	require.NoError(t, err, "the migration Job's command: %s", out)

	broker := podOf(t, objs, find(t, objs, "Deployment", "keb"), bins, secrets, filepath.Join(dir, "broker-pod"))
	b := startBroker(t, ctx, broker.command(ctx), user, password)
	api := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	status := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	sandboxURL := fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	get := func(url, u, p string) (int, []byte) { return b.call(t, http.MethodGet, url, u, p, "") }
	b.waitReady(t, status+"/readyz", time.Minute)
	code, _ := get(status+"/v2/catalog", user, password)
	assert.Equal(t, http.StatusNotFound, code, "the status port serves no API")
	code, body := get(api+"/v2/catalog", user, password)
	require.Equal(t, http.StatusOK, code, "%s", body)
	assert.Contains(t, string(body), "47c9dcbf-ff30-448e-ab36-d3bad66ba281", "the catalog of the chart's ConfigMap")
	code, _ = get(api+"/v2/catalog", user, "wrong")
	assert.Equal(t, http.StatusUnauthorized, code)

	// The sandbox listens on every interface: its admin endpoints need the Secret's credentials.
	code, _ = get(sandboxURL+"/_sandbox/", "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(sandboxURL+"/_sandbox/", "sandbox", sandboxPassword)
	assert.Equal(t, http.StatusOK, code)

	// Provision through the OSB API and wait for the operation to succeed.
	b.provision(t, api, "chart", 3*time.Minute)

	// Every metric the dashboard and the alerts query is exported, but for the assumed ones.
	code, body = get(status+"/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			exported[strings.Fields(name)[0]] = true
		}
	}
	var missing []string
	for m, where := range metricsUsed(t) {
		if !exported[m] && !assumedMetrics[m] && !untilUsed[m] {
			missing = append(missing, fmt.Sprintf("%s (%s)", m, strings.Join(where, "; ")))
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "metrics the dashboard or the alerts use that the broker does not export")
}
