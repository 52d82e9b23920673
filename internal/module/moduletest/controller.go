package moduletest

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

var kymaGVR = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}

// RunReadyController stands in for Kyma's lifecycle manager until the test ends: for every Kyma
// resource in ns it reports each module of spec.modules in status.modules, first as Processing,
// on the next change as Ready.
func RunReadyController(t testing.TB, dyn dynamic.Interface, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := dyn.Resource(kymaGVR).Namespace(ns)
	w, err := client.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("moduletest: watch Kymas in %s: %v", ns, err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			old, _, _ := unstructured.NestedSlice(obj.Object, "status", "modules")
			reported := map[string]bool{}
			for _, it := range old {
				if m, ok := it.(map[string]any); ok {
					reported[m["name"].(string)] = true
				}
			}
			specMods, _, _ := unstructured.NestedSlice(obj.Object, "spec", "modules")
			status := []any{}
			for _, it := range specMods {
				m, ok := it.(map[string]any)
				if !ok {
					continue
				}
				state := "Ready"
				if !reported[m["name"].(string)] {
					state = "Processing"
				}
				status = append(status, map[string]any{"name": m["name"], "state": state})
			}
			if reflect.DeepEqual(old, status) {
				continue
			}
			_ = unstructured.SetNestedSlice(obj.Object, status, "status", "modules")
			// Conflicts are fine: the next event brings the newer object.
			_, _ = client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		}
	}()
}
