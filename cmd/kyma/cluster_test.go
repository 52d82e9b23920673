package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/modulemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// runIn runs the CLI in this process (cobra parses the real flags) in dir.
func runIn(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs(args)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(dir))
	defer func() { require.NoError(t, os.Chdir(wd)) }()
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// The real CLI's flags of deploy, list and template: deploy -m -c -k -n --template
// --extra-templates -t and the manager set-up; list -A, -k, --no-headers, the mod alias;
// template's default output file and --channel-template.
func TestClusterCommandFlags(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ns := kubetest.Namespace(t)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kubetest.Kubeconfig(t), 0o600))
	kube := []string{"--kubeconfig", kubeconfig}

	// Templates of two modules from archives: the default output file, and the channel form.
	for _, name := range []string{"alpha", "beta"} {
		src := filepath.Join(dir, name)
		cfg, err := module.LoadConfig(moduletest.WriteSample(t, src, name, "1.0.0"))
		require.NoError(t, err)
		a, err := module.Create(ctx, module.CreateOptions{Config: cfg, Dir: src, Registry: "registry.example"})
		require.NoError(t, err)
		_, err = module.SaveArchive(ctx, filepath.Join(dir, name+"-archive"), a)
		require.NoError(t, err)
		_, stderr, err := runIn(t, src, "alpha", "template", "mod", "--path", filepath.Join(dir, name+"-archive"), "--namespace", ns)
		require.NoError(t, err, stderr)
		require.FileExists(t, filepath.Join(src, "template.yaml"))
	}
	_, stderr, err := runIn(t, dir, "alpha", "template", "module", "--path", filepath.Join(dir, "alpha-archive"), "-n", ns, "--channel-template", "-o", "legacy.yaml")
	require.NoError(t, err, stderr)
	legacy, err := os.ReadFile(filepath.Join(dir, "legacy.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(legacy), "name: alpha-fast")
	assert.NotContains(t, string(legacy), "ModuleReleaseMeta")

	pub := filepath.Join(dir, "pub.pem")
	require.NoError(t, module.WriteKeyPair(filepath.Join(dir, "key.pem"), pub, 2048, false))
	out, stderr, err := runIn(t, dir, append([]string{"alpha", "deploy", "-n", ns, "-k", "my-kyma", "-c", "fast",
		"-m", "alpha", "-m", "beta:regular", "--template", "alpha/template.yaml", "--extra-templates", "beta/template.yaml", "-t", "1m",
		"--manager-public-key", pub, "--manager-registry", "registry.example", "--manager-registry-credentials", "u:p",
		"--manager-plain-http-registry", "registry.example"}, kube...)...)
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "deployed 4 object(s) and Kyma "+ns+"/my-kyma")
	dyn := kubetest.Dynamic(t)
	k, err := dyn.Resource(module.KymaGVR).Namespace(ns).Get(ctx, "my-kyma", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "fast", module.KymaChannel(k))
	mods, err := module.KymaModules(k)
	require.NoError(t, err)
	assert.Equal(t, []module.ModuleSpec{{Name: "alpha", CustomResourcePolicy: module.PolicyCreateAndDel}, {Name: "beta", Channel: "regular", CustomResourcePolicy: module.PolicyCreateAndDel}}, mods)
	// The manager's configuration is where the manager reads it.
	cfg := modulemanager.Config{}
	require.NoError(t, modulemanager.LoadClusterConfig(ctx, kubetest.Clientset(t), ns+"/"+modulemanager.DefaultConfigName, &cfg))
	assert.Len(t, cfg.PublicKeys, 1)
	assert.Equal(t, []string{"registry.example"}, cfg.PlainHTTPRegistries)
	assert.Equal(t, ns+"/"+modulemanager.DefaultSecretName, cfg.RegistrySecret)

	// -t is the timeout: a tiny one fails.
	_, _, err = runIn(t, dir, append([]string{"alpha", "deploy", "-n", ns, "-k", "my-kyma", "-t", "1ns"}, kube...)...)
	require.Error(t, err)

	out, stderr, err = runIn(t, dir, append([]string{"alpha", "list", "mods", "-A", "--no-headers"}, kube...)...)
	require.NoError(t, err, stderr)
	assert.Regexp(t, `(?m)^alpha\s+fast\s+1\.0\.0\s+`+ns+`/alpha-1\.0\.0$`, out)
	assert.Regexp(t, `(?m)^beta\s+fast\s+1\.0\.0\s+`+ns+`/beta-1\.0\.0$`, out)
	assert.NotContains(t, out, "MODULE")
	out, stderr, err = runIn(t, dir, append([]string{"alpha", "list", "module", "-n", ns, "-k", "my-kyma"}, kube...)...)
	require.NoError(t, err, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	assert.Regexp(t, `^MODULE\s+CHANNEL\s+VERSION\s+STATE\s+TEMPLATE\s+MESSAGE$`, lines[0])
	assert.Regexp(t, `^alpha\s+fast\s+-\s+-\s+-$`, lines[1])
	assert.Regexp(t, `^beta\s+regular\s+-\s+-\s+-$`, lines[2])

	// What the Kyma status reports shows in the list.
	require.NoError(t, unstructured.SetNestedSlice(k.Object, []any{map[string]any{"name": "alpha", "state": "Error", "version": "1.0.0", "message": "boom"}}, "status", "modules"))
	_, err = dyn.Resource(module.KymaGVR).Namespace(ns).UpdateStatus(ctx, k, metav1.UpdateOptions{})
	require.NoError(t, err)
	out, stderr, err = runIn(t, dir, append([]string{"alpha", "list", "module", "-n", ns, "-k", "my-kyma", "-o", "json"}, kube...)...)
	require.NoError(t, err, stderr)
	assert.Contains(t, out, `"state": "Error"`)
	assert.Contains(t, out, `"message": "boom"`)

	// disable -c: only the entry of that channel.
	_, stderr, err = runIn(t, dir, append([]string{"alpha", "disable", "module", "beta", "-n", ns, "-k", "my-kyma", "-c", "fast"}, kube...)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not enabled")
	_, stderr, err = runIn(t, dir, append([]string{"alpha", "disable", "mod", "beta", "-n", ns, "-k", "my-kyma", "-c", "regular"}, kube...)...)
	require.NoError(t, err, stderr)
}
