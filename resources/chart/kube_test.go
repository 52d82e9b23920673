package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

// Every object the chart renders, with the default and the HA values, is accepted by the test's
// kube-apiserver: a server-side apply in dry-run mode with strict field validation checks it
// against the server's OpenAPI schema (built-in kinds) and the CRDs' schemas (the
// prometheus-operator CRDs of testdata/crds, the agent's of resources/crds), and runs admission.
func TestRenderedObjectsApplyServerSide(t *testing.T) {
	cfg := kubetest.RESTConfig(t)
	require.NoError(t, kubetest.InstallCRDs(cfg, "testdata/crds", 2*time.Minute))
	ns := kubetest.Namespace(t)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The Runtime Agent's Roles live in a runtime's namespaces, which exist there.
	for _, n := range []string{"compass-system", "kyma-system", "istio-system", "kyma-integration"} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	dc, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))

	apply := func(o object) error {
		u := &unstructured.Unstructured{Object: o}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("the server does not serve %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(ns)
			}
			ri = dc.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		force := true
		_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
			DryRun: []string{metav1.DryRunAll}, FieldManager: "keb-chart-test", Force: &force, FieldValidation: "Strict",
		})
		return err
	}
	for name, vals := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			for _, o := range render(t, ns, vals) {
				require.NoError(t, apply(o), "%s %s", o.kind(), o.name())
			}
		})
	}
	// The validation is strict: a misspelt field, or a wrong type, is refused.
	objs := render(t, ns, nil)
	dep := find(t, objs, "Deployment", "keb")
	containers(dep)[0]["readinesProbe"] = map[string]any{}
	require.ErrorContains(t, apply(dep), "readinesProbe")
	rule := find(t, objs, "PrometheusRule", "keb")
	list(dig(rule, "spec", "groups"))[0].(map[string]any)["rules"].([]any)[0].(map[string]any)["for"] = "5 minutes"
	require.ErrorContains(t, apply(rule), "for")
}
