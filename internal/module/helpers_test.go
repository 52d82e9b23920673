package module

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"path/filepath"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// The cluster tests need a kube-apiserver; the registry tests start their own registries.
func TestMain(m *testing.M) { kubetest.Main(m) }

// sampleFiles are the files of a sample module, written in the given order.
func sampleFiles(name, version string) map[string]string {
	return map[string]string{
		"module-config.yaml":         "name: kyma-project.io/module/" + name + "\nversion: " + version + "\nchannel: fast\nmanifest: manifest.yaml\ndefaultCR: default.yaml\nsecurity: sec-scanners-config.yaml\nlabels:\n  team: keb\nannotations:\n  docs: https://example.org/" + name + "\nresources:\n- name: charts\n  path: charts\n",
		"manifest.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n",
		"default.yaml":               "apiVersion: operator.kyma-project.io/v1alpha1\nkind: Sample\nmetadata:\n  name: default\nspec:\n  replicas: 1\n",
		"sec-scanners-config.yaml":   "module-name: " + name + "\n",
		"charts/Chart.yaml":          "name: " + name + "\nversion: " + version + "\n",
		"charts/templates/cm.yaml":   "kind: ConfigMap\n",
		"charts/values.yaml":         "replicas: 1\n",
		"charts/templates/z/deep.md": "deep\n",
	}
}

// writeModule writes the files into dir in the order given, with mode perm.
func writeModule(t testing.TB, dir string, files map[string]string, order []string, perm os.FileMode) {
	t.Helper()
	for _, name := range order {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(files[name]), perm))
		require.NoError(t, os.Chmod(p, perm))
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// createSample writes a sample module into a new directory and creates it.
func createSample(t testing.TB, name, version, registry string) *Artifact {
	t.Helper()
	dir := t.TempDir()
	files := sampleFiles(name, version)
	writeModule(t, dir, files, keys(files), 0o644)
	cfg, err := LoadConfig(filepath.Join(dir, "module-config.yaml"))
	require.NoError(t, err)
	a, err := Create(context.Background(), CreateOptions{Config: cfg, Dir: dir, Registry: registry})
	require.NoError(t, err)
	return a
}

func newKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

func testLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return l
}
