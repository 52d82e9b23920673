package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The real Kyma CLI's flags of create, sign and verify (docs/user/modules.md, "Real Kyma CLI
// flags"), each run against a real registry with basic auth.
func TestRealCLIFlags(t *testing.T) {
	ctx := context.Background()
	srv := moduletest.Start(t, moduletest.Options{Auth: true})
	work := t.TempDir()
	t.Chdir(work)
	src := filepath.Join(work, "src")
	moduletest.WriteSample(t, src, "flagged", "0.1.0")
	require.NoError(t, os.WriteFile(filepath.Join(src, "other-cr.yaml"), []byte("apiVersion: operator.kyma-project.io/v1alpha1\nkind: Sample\nmetadata:\n  name: other\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "sec.yaml"), []byte("module-name: flagged\nprotecode:\n- europe-docker.pkg.dev/kyma-project/prod/flagged-manager:0.1.0\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(src, "extra"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "extra", "values.yaml"), []byte("a: 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "runner"), []byte("#!/bin/sh\n"), 0o755))
	_, _, err := runIn(t, ".", "alpha", "create", "key", "--private-key", "key.pem", "--public-key", "pub.pem", "--bits", "2048")
	require.NoError(t, err)

	base := "http://" + srv.Addr + "/real"
	t.Setenv("KYMA_REGISTRY_USERNAME", srv.Username)
	// -p, -t, -r (both forms), --registry http://, --registry-cred-selector, --descriptor-version,
	// -n/--name, --version, --channel, --default-cr, --sec-scanners-config, --namespace, --key,
	// --module-archive-path, and -o's default.
	out, errOut, err := runIn(t, ".", "alpha", "create", "mod", "--module-config-file", filepath.Join(src, "module-config.yaml"),
		"-p", src, "--registry", base, "-t", srv.Password, "-r", "extra:helm-chart@extra", "-r", "runner",
		"--registry-cred-selector", "team=flags", "--descriptor-version", "v2", "-n", "kyma-project.io/module/renamed",
		"--version", "0.2.0", "--channel", "experimental", "--default-cr", "other-cr.yaml", "--sec-scanners-config", "sec.yaml",
		"--namespace", "kcp-flags", "--key", "key.pem", "--module-archive-path", "archive")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "pushed "+srv.Addr+"/real/component-descriptors/kyma-project.io/module/renamed:0.2.0")
	tmpl, err := os.ReadFile("template.yaml")
	require.NoError(t, err, "-o defaults to template.yaml")
	assert.Contains(t, string(tmpl), "namespace: kcp-flags")
	assert.Contains(t, string(tmpl), "name: other")

	reg, err := module.NewRegistry(module.RegistryOptions{Registry: base, Username: srv.Username, Password: srv.Password}, logrus.New())
	require.NoError(t, err)
	got, err := reg.Get(ctx, "kyma-project.io/module/renamed", "0.2.0")
	require.NoError(t, err)
	cd := got.Descriptor
	assert.Equal(t, base, cd.EffectiveRepositoryContext().BaseURL)
	extra := cd.Resource("extra")
	require.NotNil(t, extra)
	assert.Equal(t, "helm-chart", extra.Type)
	assert.Contains(t, extra.Labels, module.Label{Name: module.LabelRegistryCred, Value: map[string]any{"team": "flags"}})
	tool := cd.Resource("runner")
	require.NotNil(t, tool, "-r PATH is named after the path")
	assert.Equal(t, "helm-chart", tool.Type)
	assert.NotNil(t, cd.Resource("flagged-manager"), "--sec-scanners-config's protecode image")

	// --insecure with a bare registry writes the http:// base URL too.
	_, errOut, err = runIn(t, ".", "alpha", "create", "module", "--module-config-file", filepath.Join(src, "module-config.yaml"),
		"--registry", srv.Addr+"/plain", "--insecure", "-c", srv.Username+":"+srv.Password, "-o", "plain.yaml")
	require.NoError(t, err, errOut)
	plain, err := os.ReadFile("plain.yaml")
	require.NoError(t, err)
	assert.Contains(t, string(plain), "baseUrl: http://"+srv.Addr+"/plain")

	// --module-archive-version-overwrite and its alias --overwrite.
	create := []string{"alpha", "create", "module", "--module-config-file", filepath.Join(src, "module-config.yaml"), "--registry", base, "-t", srv.Password, "-o", "changed.yaml"}
	_, errOut, err = runIn(t, ".", create...)
	require.NoError(t, err, errOut)
	require.NoError(t, os.WriteFile(filepath.Join(src, "manifest.yaml"), []byte("kind: ConfigMap # changed\n"), 0o644))
	_, _, err = runIn(t, ".", create...)
	assert.ErrorContains(t, err, "already exists with other content")
	_, errOut, err = runIn(t, ".", append(create, "--module-archive-version-overwrite")...)
	require.NoError(t, err, errOut)
	require.NoError(t, os.WriteFile(filepath.Join(src, "manifest.yaml"), []byte("kind: ConfigMap # again\n"), 0o644))
	_, errOut, err = runIn(t, ".", append(create, "--overwrite")...)
	require.NoError(t, err, errOut)

	// --descriptor-version other than v2, and the real CLI's flags this CLI does not take.
	_, _, err = runIn(t, ".", "alpha", "create", "module", "--module-config-file", filepath.Join(src, "module-config.yaml"), "--descriptor-version", "ocm.software/v3alpha1")
	assert.ErrorContains(t, err, "v2 only")
	for _, flag := range []string{"--module-archive-persistence", "--kubebuilder-project", "--git-remote=origin"} {
		_, _, err = runIn(t, ".", "alpha", "create", "module", "--module-config-file", filepath.Join(src, "module-config.yaml"), flag)
		assert.ErrorContains(t, err, "unknown flag", flag)
	}

	// sign and verify with --name and --version (the real CLI's form), -c, -t, --name-mapping.
	_, errOut, err = runIn(t, ".", "alpha", "sign", "module", "--name", "kyma-project.io/module/renamed", "--version", "0.2.0",
		"--registry", base, "-c", srv.Username+":"+srv.Password, "--name-mapping", "urlPath", "--key", "key.pem", "--signature-name", "release")
	require.NoError(t, err, errOut)
	out, errOut, err = runIn(t, ".", "alpha", "verify", "mod", "--name", "kyma-project.io/module/renamed", "--version", "0.2.0",
		"--registry", base, "-t", srv.Password, "--key", "pub.pem", "--signature-name", "release")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "verified kyma-project.io/module/renamed:0.2.0")
	_, _, err = runIn(t, ".", "alpha", "verify", "module", "kyma-project.io/module/renamed:0.2.0", "--version", "9.9.9", "--registry", base, "-t", srv.Password, "--key", "pub.pem")
	assert.ErrorContains(t, err, "different modules")

	// push and pull pick a module of a shared archive by --name and --version.
	_, errOut, err = runIn(t, ".", "alpha", "create", "module", "--module-config-file", filepath.Join(src, "module-config.yaml"), "--module-archive-path", "archive")
	require.NoError(t, err, errOut)
	_, _, err = runIn(t, ".", "alpha", "push", "module", "-p", "archive", "--registry", base, "-t", srv.Password)
	assert.ErrorContains(t, err, "2 matches")
	_, errOut, err = runIn(t, ".", "alpha", "push", "module", "-p", "archive", "--name", "kyma-project.io/module/flagged", "--version", "0.1.0", "--registry", base, "-t", srv.Password, "--overwrite")
	require.NoError(t, err, errOut)
	_, errOut, err = runIn(t, ".", "alpha", "pull", "module", "--name", "kyma-project.io/module/renamed", "--version", "0.2.0", "-p", "pulled", "--registry", base, "-t", srv.Password)
	require.NoError(t, err, errOut)
	_, errOut, err = runIn(t, ".", "alpha", "verify", "module", "-p", "pulled", "--key", "pub.pem")
	require.NoError(t, err, errOut)

	// create key: no overwrite without --force; with it, 0600.
	_, _, err = runIn(t, ".", "alpha", "create", "key", "--private-key", "key.pem", "--public-key", "pub.pem", "--bits", "2048")
	assert.ErrorContains(t, err, "--force")
	_, _, err = runIn(t, ".", "alpha", "create", "key", "--private-key", "same.pem", "--public-key", "same.pem", "--bits", "2048")
	assert.ErrorContains(t, err, "same file")
	_, _, err = runIn(t, ".", "alpha", "create", "key", "--private-key", "key.pem", "--public-key", "pub.pem", "--bits", "2048", "--force")
	require.NoError(t, err)
	info, err := os.Stat("key.pem")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// A module name lifecycle-manager would reject is refused before anything is pushed.
	bad := filepath.Join(work, "bad")
	moduletest.WriteSample(t, bad, "keda2", "1.0.0")
	_, _, err = runIn(t, ".", "alpha", "create", "module", "--module-config-file", filepath.Join(bad, "module-config.yaml"), "--registry", base, "-t", srv.Password)
	assert.ErrorContains(t, err, `module name "keda2"`)
	list, err := reg.List(ctx)
	require.NoError(t, err)
	for _, m := range list {
		assert.False(t, strings.Contains(m.Component, "keda2"))
	}
}
