package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func build(t *testing.T, pkg, name string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, "./"+pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, out)
	return bin
}

// syncBuffer is the output a process writes while the test reads it.
type syncBuffer = testenv.SyncBuffer

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// The whole loop with the real binaries: create, sign, push (to a registry with auth), template,
// deploy (which sets the manager up: keys, registry Secret), the module-manager binary installs
// what enable --wait asks for; a changed channel upgrades with the manager killed (SIGKILL) in the
// middle and restarted; disable --wait removes the module.
func TestModuleManagerBinary(t *testing.T) {
	kyma := build(t, "cmd/kyma", "kyma")
	manager := build(t, "cmd/module-manager", "module-manager")
	srv := moduletest.Start(t, moduletest.Options{Auth: true})
	ns := kubetest.Namespace(t)
	dyn := kubetest.Dynamic(t)
	ctx := context.Background()
	work := t.TempDir()
	kubeconfig := filepath.Join(work, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kubetest.Kubeconfig(t), 0o600))
	// An empty docker config: the manager's credentials can only come from the Secret.
	env := append(os.Environ(), "DOCKER_CONFIG="+t.TempDir(), "KUBECONFIG="+kubeconfig)
	creds := srv.Username + ":" + srv.Password
	reg := []string{"--registry", srv.Addr, "--insecure", "-c", creds}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kyma, args...)
		cmd.Dir, cmd.Env = work, env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Run(), "kyma %s: %s%s", strings.Join(args, " "), out.String(), errOut.String())
		return out.String()
	}
	publish := func(version, channel string) {
		dir := filepath.Join(work, "src-"+version)
		cfg := moduletest.WriteInstallable(t, dir, "managed", version, channel, ns)
		run(append([]string{"alpha", "create", "module", "--module-config-file", cfg, "--key", "key.pem"}, reg...)...)
		run(append([]string{"alpha", "template", "module", "kyma-project.io/module/managed:" + version, "-n", ns, "-o", "t-" + version + ".yaml"}, reg...)...)
		run("alpha", "deploy", "--template", "t-"+version+".yaml", "-n", ns,
			"--manager-public-key", "pub.pem", "--manager-registry", srv.Addr, "--manager-registry-credentials", creds,
			"--manager-plain-http-registry", srv.Addr)
	}
	run("alpha", "create", "key", "--private-key", "key.pem", "--public-key", "pub.pem", "--bits", "2048")
	publish("1.0.0", "regular")
	moduletest.RunSampleOperator(t, dyn, "managed", ns)

	var logs syncBuffer
	start := func() *exec.Cmd {
		cmd := exec.Command(manager, "--config", ns+"/module-manager", "--namespace", ns, "--requeue", "200ms", "--resync", "2s")
		cmd.Env, cmd.Stdout, cmd.Stderr = env, &logs, &logs
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	proc := start()

	out := run("alpha", "enable", "module", "managed", "-n", ns, "--wait", "-t", "2m")
	assert.Contains(t, out, "module managed is Ready", logs.String())
	out = run("alpha", "list", "module", "-n", ns, "-k", "default-kyma", "--no-headers")
	assert.Regexp(t, `managed\s+regular\s+1\.0\.0\s+Ready\s+`+ns+`/managed-1\.0\.0`, out)

	// Upgrade through the channel, killing the manager right in it.
	publish("2.0.0", "fast")
	run("alpha", "enable", "module", "managed", "-n", ns, "-c", "fast")
	time.Sleep(150 * time.Millisecond) // somewhere inside the reconcile of the change
	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	_ = proc.Wait()
	start()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		k, err := dyn.Resource(module.KymaGVR).Namespace(ns).Get(ctx, module.DefaultKymaName, metav1.GetOptions{})
		require.NoError(t, err)
		mods, _, _ := unstructured.NestedSlice(k.Object, "status", "modules")
		if len(mods) == 1 && mods[0].(map[string]any)["version"] == "2.0.0" && mods[0].(map[string]any)["state"] == "Ready" {
			break
		}
		require.True(t, time.Now().Before(deadline), "no upgrade after restart: %v\n%s", mods, logs.String())
		time.Sleep(100 * time.Millisecond)
	}
	_, err := dyn.Resource(configMaps).Namespace(ns).Get(ctx, "managed-v2.0.0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := dyn.Resource(configMaps).Namespace(ns).Get(ctx, "managed-v1.0.0", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "1.0.0's ConfigMap pruned")

	out = run("alpha", "disable", "module", "managed", "-n", ns, "--wait", "-t", "2m")
	assert.Contains(t, out, "module managed is removed")
	for _, n := range []string{"managed-operator", "managed-v2.0.0"} {
		_, err := dyn.Resource(configMaps).Namespace(ns).Get(ctx, n, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s removed", n)
	}
	_, err = dyn.Resource(moduletest.OperatorGVR("managed")).Namespace(ns).Get(ctx, "managed", metav1.GetOptions{})
	assert.Error(t, err, "default CR removed")
}

// Without keys the manager refuses to start.
func TestModuleManagerNeedsKeys(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kubetest.Kubeconfig(t), 0o600))
	cmd := newCmd()
	cmd.SetArgs([]string{"--kubeconfig", kubeconfig})
	err := cmd.ExecuteContext(context.Background())
	require.ErrorContains(t, err, "no public keys")
}
