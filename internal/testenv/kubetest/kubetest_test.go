package kubetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func TestShootAndCompassConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dc := kubetest.Dynamic(t)
	ns := kubetest.Namespace(t)

	// A Shoot in the test namespace.
	shoot := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1",
		"kind":       "Shoot",
		"metadata":   map[string]any{"name": "c-1234567"},
		"spec": map[string]any{
			"region":     "eu-west-1",
			"provider":   map[string]any{"type": "aws"},
			"kubernetes": map[string]any{"version": "1.34"},
		},
	}}
	created, err := dc.Resource(kubetest.ShootGVR).Namespace(ns).Create(ctx, shoot, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create shoot: %v", err)
	}
	if created.GetNamespace() != ns || created.GetUID() == "" {
		t.Fatalf("created shoot: namespace %q uid %q", created.GetNamespace(), created.GetUID())
	}
	got, err := dc.Resource(kubetest.ShootGVR).Namespace(ns).Get(ctx, "c-1234567", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get shoot: %v", err)
	}
	if region, _, _ := unstructured.NestedString(got.Object, "spec", "region"); region != "eu-west-1" {
		t.Errorf("shoot spec.region = %q, want eu-west-1", region)
	}

	// A cluster-scoped CompassConnection (unique name: the server may be
	// shared with other test binaries).
	name := "compass-" + strings.TrimPrefix(ns, "kt-")
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "compass.kyma-project.io/v1alpha1",
		"kind":       "CompassConnection",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"managementInfo": map[string]any{"connectorUrl": "https://connector.example.com", "directorUrl": "https://director.example.com"}},
	}}
	client := dc.Resource(kubetest.CompassConnectionGVR)
	cc, err = client.Create(ctx, cc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create compassconnection: %v", err)
	}
	t.Cleanup(func() {
		if err := client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete compassconnection: %v", err)
		}
	})
	if cc.GetNamespace() != "" {
		t.Fatalf("compassconnection is namespaced: %q", cc.GetNamespace())
	}

	// No status subresource, as the real CRD: status is written with the object, and /status
	// does not exist.
	if _, err := client.UpdateStatus(ctx, cc, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("update compassconnection status: %v, want NotFound (no status subresource)", err)
	}
	cc.Object["status"] = map[string]any{"connectionState": "Synchronized", "connectionStatus": map[string]any{"certificateStatus": map[string]any{}}}
	if _, err := client.Update(ctx, cc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update compassconnection with status: %v", err)
	}
	cc, err = client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get compassconnection: %v", err)
	}
	if state, _, _ := unstructured.NestedString(cc.Object, "status", "connectionState"); state != "Synchronized" {
		t.Errorf("status.connectionState = %q, want Synchronized", state)
	}
	if url, _, _ := unstructured.NestedString(cc.Object, "spec", "managementInfo", "directorUrl"); url != "https://director.example.com" {
		t.Errorf("spec lost after status update: %v", cc.Object["spec"])
	}
}

func TestAllCRDsServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dc := kubetest.Dynamic(t)
	ns := kubetest.Namespace(t)
	if _, err := dc.Resource(kubetest.KymaGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list kymas: %v", err)
	}
	if _, err := dc.Resource(kubetest.ModuleTemplateGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list moduletemplates: %v", err)
	}
}

func TestKubeconfig(t *testing.T) {
	data := kubetest.Kubeconfig(t)
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("parse kubeconfig: %v", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		t.Fatalf("kubeconfig has no current context")
	}
	if !strings.HasPrefix(cfg.Clusters[ctx.Cluster].Server, "https://127.0.0.1:") {
		t.Errorf("server = %q, want https://127.0.0.1:<port>", cfg.Clusters[ctx.Cluster].Server)
	}

	// Admin rights: system:masters bypasses RBAC.
	cs := kubetest.Clientset(t)
	ns := kubetest.Namespace(t)
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("get own namespace: %v", err)
	}
}
