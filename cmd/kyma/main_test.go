package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// buildKyma builds the CLI binary for the test: the tests run it as separate processes.
func buildKyma(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kyma")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

type result struct {
	stdout, stderr string
	err            error
}

func runKyma(bin, dir string, env []string, args ...string) result {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// runParallel starts every command at once, as separate processes, and waits for all.
func runParallel(bin string, cmds [][]string, dirs []string, env []string) []result {
	results := make([]result, len(cmds))
	var wg sync.WaitGroup
	for i := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runKyma(bin, dirs[i], env, cmds[i]...)
		}()
	}
	wg.Wait()
	return results
}

var digestRE = regexp.MustCompile(`digest (sha256:[0-9a-f]{64})`)

func registryOf(t *testing.T, srv *moduletest.Registry) *module.Registry {
	t.Helper()
	r, err := module.NewRegistry(module.RegistryOptions{Registry: srv.Addr, Insecure: true}, logrus.New())
	require.NoError(t, err)
	return r
}

// 20 parallel create+push processes of different modules, 20 of the same module, 20 of the same
// version with different content, and 20 parallel enables: every artifact correct, no error but
// the expected "already exists with other content".
func TestConcurrentProcesses(t *testing.T) {
	const n = 20
	ctx := context.Background()
	bin := buildKyma(t)
	srv := moduletest.Start(t, moduletest.Options{})
	reg := registryOf(t, srv)
	work := t.TempDir()
	keyFile, pubFile := filepath.Join(work, "private.pem"), filepath.Join(work, "public.pem")
	require.NoError(t, module.WriteKeyPair(keyFile, pubFile, 2048, false))
	pub, err := module.LoadPublicKey(pubFile)
	require.NoError(t, err)

	create := func(dir string) []string {
		return []string{"alpha", "create", "module", "--module-config-file", filepath.Join(dir, "module-config.yaml"),
			"--registry", srv.Addr, "--insecure", "--key", keyFile, "-o", filepath.Join(dir, "template.yaml")}
	}
	var cmds [][]string
	var dirs []string
	for i := 0; i < n; i++ {
		dir := filepath.Join(work, fmt.Sprintf("different-%02d", i))
		moduletest.WriteSample(t, dir, moduleWord(i), "1.0.0")
		cmds, dirs = append(cmds, create(dir)), append(dirs, dir)
	}
	for i := 0; i < n; i++ {
		dir := filepath.Join(work, fmt.Sprintf("same-%02d", i))
		moduletest.WriteSample(t, dir, "same", "1.0.0")
		cmds, dirs = append(cmds, create(dir)), append(dirs, dir)
	}
	for i := 0; i < n; i++ {
		dir := filepath.Join(work, fmt.Sprintf("clash-%02d", i))
		moduletest.WriteSample(t, dir, "clash", "1.0.0")
		// Same name and version, different content.
		require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), fmt.Appendf(nil, "kind: ConfigMap # %d\n", i), 0o644))
		cmds, dirs = append(cmds, create(dir)), append(dirs, dir)
	}
	results := runParallel(bin, cmds, dirs, nil)

	digestOf := func(r result) string {
		m := digestRE.FindStringSubmatch(r.stdout)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for i := 0; i < n; i++ {
		r := results[i]
		require.NoError(t, r.err, "different module %d: %s", i, r.stderr)
		name := "kyma-project.io/module/" + moduleWord(i)
		got, err := reg.Get(ctx, name, "1.0.0")
		require.NoError(t, err)
		require.NoError(t, got.Verify("", pub), name)
		p, err := got.Pack()
		require.NoError(t, err)
		assert.Equal(t, digestOf(r), p.Manifest.Digest.String(), name)
		assert.FileExists(t, filepath.Join(dirs[i], "template.yaml"))
	}
	sameDigest := digestOf(results[n])
	require.NotEmpty(t, sameDigest)
	for i := n; i < 2*n; i++ {
		r := results[i]
		require.NoError(t, r.err, "same module %d: %s", i-n, r.stderr)
		assert.Equal(t, sameDigest, digestOf(r), "same inputs, same digest")
	}
	got, err := reg.Get(ctx, "kyma-project.io/module/same", "1.0.0")
	require.NoError(t, err)
	require.NoError(t, got.Verify("", pub))

	won := map[string]bool{}
	for i := 2 * n; i < 3*n; i++ {
		r := results[i]
		if r.err != nil {
			assert.Contains(t, r.stderr, "already exists with other content", "clash %d", i-2*n)
			continue
		}
		won[digestOf(r)] = true
	}
	require.NotEmpty(t, won, "one of the clashing pushes must win")
	clash, err := reg.Get(ctx, "kyma-project.io/module/clash", "1.0.0")
	require.NoError(t, err)
	require.NoError(t, clash.Verify("", pub))
	p, err := clash.Pack()
	require.NoError(t, err)
	assert.True(t, won[p.Manifest.Digest.String()], "the registry holds a version a successful push reported")
	t.Logf("clashing pushes: %d of %d succeeded", len(won), n)

	// 20 parallel enables of different modules on one Kyma resource.
	ns := kubetest.Namespace(t)
	kubeconfig := filepath.Join(work, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kubetest.Kubeconfig(t), 0o600))
	r := runKyma(bin, work, nil, "alpha", "deploy", "--kubeconfig", kubeconfig, "-n", ns)
	require.NoError(t, r.err, r.stderr)
	cmds, dirs = nil, nil
	for i := 0; i < n; i++ {
		cmds = append(cmds, []string{"alpha", "enable", "module", moduleWord(i), "--kubeconfig", kubeconfig, "-n", ns, "--force-conflicts"})
		dirs = append(dirs, work)
	}
	for i, r := range runParallel(bin, cmds, dirs, nil) {
		require.NoError(t, r.err, "enable %d: %s", i, r.stderr)
	}
	kyma, err := kubetest.Dynamic(t).Resource(module.KymaGVR).Namespace(ns).Get(ctx, module.DefaultKymaName, metav1.GetOptions{})
	require.NoError(t, err)
	mods, err := module.KymaModules(kyma)
	require.NoError(t, err)
	assert.Len(t, mods, n)
}

// The CLI end to end: create with a key into an archive, push it, pull it elsewhere, verify,
// tamper, list, template, deploy, enable --wait, disable.
func TestCLIEndToEnd(t *testing.T) {
	bin := buildKyma(t)
	srv := moduletest.Start(t, moduletest.Options{Auth: true, TLS: true})
	work := t.TempDir()
	env := []string{"KYMA_REGISTRY_USERNAME=" + srv.Username, "KYMA_REGISTRY_PASSWORD=" + srv.Password}
	regFlags := []string{"--registry", srv.Addr + "/kyma", "--ca-file", srv.CAFile}
	kyma := func(args ...string) result { return runKyma(bin, work, env, args...) }
	ok := func(args ...string) string {
		t.Helper()
		r := kyma(args...)
		require.NoError(t, r.err, "kyma %s: %s", strings.Join(args, " "), r.stderr)
		return r.stdout
	}

	ok("alpha", "create", "key", "--private-key", "key.pem", "--public-key", "pub.pem", "--bits", "2048")
	ok("alpha", "create", "key", "--private-key", "other.pem", "--public-key", "other-pub.pem", "--bits", "2048")
	cfg := moduletest.WriteSample(t, filepath.Join(work, "src"), "sample", "0.1.0")
	out := ok(append([]string{"alpha", "create", "module", "--module-config-file", cfg, "--key", "key.pem", "--module-archive-path", "archive"}, regFlags...)...)
	assert.Contains(t, out, "archived in archive")
	assert.Contains(t, out, "pushed ")
	out = ok(append([]string{"alpha", "push", "module", "--path", "archive"}, regFlags...)...)
	assert.Contains(t, out, "already exists with the same content")

	ok(append([]string{"alpha", "pull", "module", "kyma-project.io/module/sample:0.1.0", "--path", "pulled"}, regFlags...)...)
	ok("alpha", "verify", "module", "--path", "pulled", "--key", "pub.pem")
	ok(append([]string{"alpha", "verify", "module", "kyma-project.io/module/sample:0.1.0", "--key", "pub.pem"}, regFlags...)...)
	r := kyma("alpha", "verify", "module", "--path", "pulled", "--key", "other-pub.pem")
	require.Error(t, r.err)
	assert.Contains(t, r.stderr, "signature does not match")

	out = ok(append([]string{"alpha", "list", "module", "-o", "json"}, regFlags...)...)
	assert.Contains(t, out, `"version": "0.1.0"`)

	// Template from the registry into the Kyma's namespace (where lifecycle-manager looks), deploy
	// it, enable with --wait while a stand-in controller reports Ready.
	ns := kubetest.Namespace(t)
	ok(append([]string{"alpha", "template", "module", "kyma-project.io/module/sample:0.1.0", "-n", ns}, regFlags...)...)
	tmpl, err := os.ReadFile(filepath.Join(work, "template.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(tmpl), "kind: ModuleReleaseMeta")
	kubeconfig := filepath.Join(work, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kubetest.Kubeconfig(t), 0o600))
	kube := []string{"--kubeconfig", kubeconfig, "-n", ns}
	ok(append([]string{"alpha", "deploy", "--template", "template.yaml"}, kube...)...)
	out = ok(append([]string{"alpha", "list", "module"}, kube...)...)
	assert.Regexp(t, `sample\s+fast\s+0\.1\.0\s+`+ns+`/sample-0\.1\.0`, out)
	moduletest.RunReadyController(t, kubetest.Dynamic(t), ns)
	r = kyma(append([]string{"alpha", "enable", "module", "sample", "--channel", "regular"}, kube...)...)
	require.Error(t, r.err, "no template offers the regular channel")
	assert.Contains(t, r.stderr, `has no channel "regular"`)
	out = ok(append([]string{"alpha", "enable", "module", "sample", "--channel", "fast", "--policy", "Ignore", "--wait", "--timeout", "1m"}, kube...)...)
	assert.Contains(t, out, "module sample is Ready")
	out = ok(append([]string{"alpha", "list", "mod", "-k", "default-kyma", "--no-headers"}, kube...)...)
	assert.Regexp(t, `^sample\s+fast\s+-\s+Ready\s+-\n$`, out)
	out = ok(append([]string{"alpha", "disable", "module", "sample"}, kube...)...)
	assert.Contains(t, out, "module sample disabled")
	r = kyma(append([]string{"alpha", "disable", "module", "sample"}, kube...)...)
	require.Error(t, r.err)
	assert.Contains(t, r.stderr, "not enabled")
	ok(append([]string{"alpha", "disable", "module", "sample", "-f"}, kube...)...)

	// Tampering with a pulled layer: verify names the layer.
	art, err := module.LoadArchive(context.Background(), filepath.Join(work, "pulled"), "", "")
	require.NoError(t, err)
	ref := art.Descriptor.Resource("charts").Access.LocalReference
	blob := filepath.Join(work, "pulled", "blobs", "sha256", strings.TrimPrefix(ref, "sha256:"))
	data, err := os.ReadFile(blob)
	require.NoError(t, err)
	data[len(data)-1] ^= 0xff
	require.NoError(t, os.WriteFile(blob, data, 0o644))
	r = kyma("alpha", "verify", "module", "--path", "pulled", "--key", "pub.pem")
	require.Error(t, r.err)
	assert.Contains(t, r.stderr, "resource charts: layer "+ref)

	// Wrong credentials are refused.
	r = runKyma(bin, work, nil, append([]string{"alpha", "push", "module", "--path", "archive", "-c", "keb:wrong"}, regFlags...)...)
	require.Error(t, r.err)

	// Credentials from the docker config.
	dockerDir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(srv.Username + ":" + srv.Password))
	require.NoError(t, os.WriteFile(filepath.Join(dockerDir, "config.json"), []byte(`{"auths":{"`+srv.Addr+`":{"auth":"`+auth+`"}}}`), 0o600))
	r = runKyma(bin, work, []string{"DOCKER_CONFIG=" + dockerDir}, append([]string{"alpha", "list", "module"}, regFlags...)...)
	require.NoError(t, r.err, r.stderr)
	assert.Contains(t, r.stdout, "sample")
}

// moduleWord is the i-th of distinct module names lifecycle-manager accepts (letters only).
func moduleWord(i int) string { return "mod" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }
