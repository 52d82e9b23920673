package moduletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// OperatorGVR is the resource of an installable test module's custom resource: kind Sample in
// the group <module>.kyma-project.io (a group per module, so tests sharing an API server do not
// share the CRD).
func OperatorGVR(module string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: module + ".kyma-project.io", Version: "v1alpha1", Resource: "samples"}
}

// SampleCRD is the CRD of a test module's custom resource (OperatorGVR), as YAML.
func SampleCRD(module string) string {
	group := OperatorGVR(module).Group
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samples.` + group + `
spec:
  group: ` + group + `
  names: {kind: Sample, listKind: SampleList, plural: samples, singular: sample}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
}

// InstallableFiles are a module a module manager can really install: its manifest carries the
// CRD of its custom resource (OperatorGVR) and ConfigMaps in ns, one
// of them named after the version (so an upgrade has something to prune); the default CR is a
// Sample in ns. name must be a lifecycle-manager module name.
func InstallableFiles(name, version, channel, ns string) map[string]string {
	group := OperatorGVR(name).Group
	return map[string]string{
		"module-config.yaml": fmt.Sprintf("name: kyma-project.io/module/%s\nversion: %s\nchannel: %s\nmanifest: manifest.yaml\ndefaultCR: default.yaml\n", name, version, channel),
		"manifest.yaml": SampleCRD(name) + `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `-operator
  namespace: ` + ns + `
data:
  version: "` + version + `"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `-v` + version + `
  namespace: ` + ns + `
`,
		"default.yaml": "apiVersion: " + group + "/v1alpha1\nkind: Sample\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n  replicas: 1\n",
	}
}

// WriteInstallable writes InstallableFiles into dir and returns the config file.
func WriteInstallable(t testing.TB, dir, name, version, channel, ns string) string {
	t.Helper()
	files := InstallableFiles(name, version, channel, ns)
	WriteFiles(t, dir, files, Paths(files), 0o644)
	return dir + "/module-config.yaml"
}

// RunSampleOperator stands in for the installable module's own operator until the test ends:
// every Sample in ns without status.state gets status.state Ready. It polls, so it does not
// care whether the CRD exists yet.
func RunSampleOperator(t testing.TB, dyn dynamic.Interface, module, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list, err := dyn.Resource(OperatorGVR(module)).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				cr := &list.Items[i]
				if s, _, _ := unstructured.NestedString(cr.Object, "status", "state"); s != "" {
					continue
				}
				_ = unstructured.SetNestedField(cr.Object, "Ready", "status", "state")
				// A conflict is fine: the next pass reads the newer object.
				_, _ = dyn.Resource(OperatorGVR(module)).Namespace(ns).Update(ctx, cr, metav1.UpdateOptions{})
			}
		}
	}()
}
