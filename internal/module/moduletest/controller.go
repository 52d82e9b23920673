package moduletest

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var kymaGVR = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}

// RunReadyController stands in for Kyma's lifecycle manager until the test ends: for every Kyma
// resource in ns it reports each module of spec.modules in status.modules, first as Processing,
// on its next pass as Ready. It polls rather than follows a watch, so a lost update (a conflict
// with the CLI's own writes) is only a pass late, never a module that stays unreported.
func RunReadyController(t testing.TB, dyn dynamic.Interface, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	client := dyn.Resource(kymaGVR).Namespace(ns)
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list, err := client.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				reportModules(ctx, client, &list.Items[i])
			}
		}
	}()
}

// reportModules moves each module of the Kyma's spec one state on: unreported to Processing,
// Processing to Ready.
func reportModules(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured) {
	old, _, _ := unstructured.NestedSlice(obj.Object, "status", "modules")
	reported := map[string]bool{}
	for _, it := range old {
		if m, ok := it.(map[string]any); ok {
			if name, ok := m["name"].(string); ok {
				reported[name] = true
			}
		}
	}
	specMods, _, _ := unstructured.NestedSlice(obj.Object, "spec", "modules")
	status := []any{}
	for _, it := range specMods {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		state := "Ready"
		if !reported[name] {
			state = "Processing"
		}
		status = append(status, map[string]any{"name": name, "state": state})
	}
	if reflect.DeepEqual(old, status) {
		return
	}
	_ = unstructured.SetNestedSlice(obj.Object, status, "status", "modules")
	// A conflict is fine: the next pass reads the newer object.
	_, _ = client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
}
