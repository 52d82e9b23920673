package moduletest

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// SampleFiles are the files of a sample module (config, manifest, default CR, security config
// and a charts directory), by path relative to the module directory.
func SampleFiles(name, version string) map[string]string {
	return map[string]string{
		"module-config.yaml": "name: kyma-project.io/module/" + name + "\nversion: " + version +
			"\nchannel: fast\nmanifest: manifest.yaml\ndefaultCR: default.yaml\nsecurity: sec-scanners-config.yaml\n" +
			"labels:\n  team: keb\nannotations:\n  docs: https://example.org/" + name + "\nresources:\n- name: charts\n  path: charts\n",
		"manifest.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n",
		"default.yaml":               "apiVersion: operator.kyma-project.io/v1alpha1\nkind: Sample\nmetadata:\n  name: default\nspec:\n  replicas: 1\n",
		"sec-scanners-config.yaml":   "module-name: " + name + "\n",
		"charts/Chart.yaml":          "name: " + name + "\nversion: " + version + "\n",
		"charts/templates/cm.yaml":   "kind: ConfigMap\n",
		"charts/values.yaml":         "replicas: 1\n",
		"charts/templates/z/deep.md": "deep\n",
	}
}

// Paths are the files' paths, sorted.
func Paths(files map[string]string) []string {
	out := make([]string, 0, len(files))
	for k := range files {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteFiles writes the files into dir in the order given, each with mode perm.
func WriteFiles(t testing.TB, dir string, files map[string]string, order []string, perm os.FileMode) {
	t.Helper()
	for _, name := range order {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("moduletest: %v", err)
		}
		if err := os.WriteFile(p, []byte(files[name]), perm); err != nil {
			t.Fatalf("moduletest: %v", err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatalf("moduletest: %v", err)
		}
	}
}

// WriteSample writes the sample module into dir and returns its config file.
func WriteSample(t testing.TB, dir, name, version string) string {
	t.Helper()
	files := SampleFiles(name, version)
	WriteFiles(t, dir, files, Paths(files), 0o644)
	return filepath.Join(dir, "module-config.yaml")
}
