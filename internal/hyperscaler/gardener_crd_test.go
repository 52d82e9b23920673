package hyperscaler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

// The test CRDs refuse what Gardener's API refuses (testdata/gardener_account_pool.yaml,
// resources.*.required and immutable), so the tests cannot rely on bindings Gardener would not
// hold; labels, what the pool writes, stay writable.
func TestBindingResourcesValidateLikeGardener(t *testing.T) {
	dyn, ns := kubetest.Dynamic(t), kubetest.Namespace(t)
	create := func(kind BindingKind, obj map[string]any) error {
		obj["metadata"] = map[string]any{"name": "b", "namespace": ns, "labels": map[string]any{LabelHyperscalerType: "aws"}}
		_, err := dyn.Resource(kind.Resource()).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		return err
	}
	sb := func(extra map[string]any) map[string]any {
		o := map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "SecretBinding"}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	cb := func(extra map[string]any) map[string]any {
		o := map[string]any{"apiVersion": "security.gardener.cloud/v1alpha1", "kind": "CredentialsBinding"}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	secretRef := map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "s"}
	for name, c := range map[string]struct {
		kind BindingKind
		obj  map[string]any
	}{
		"SecretBinding without secretRef":             {SecretBinding, sb(map[string]any{"provider": map[string]any{"type": "aws"}})},
		"SecretBinding without secretRef.name":        {SecretBinding, sb(map[string]any{"secretRef": map[string]any{"namespace": ns}})},
		"SecretBinding with provider but no type":     {SecretBinding, sb(map[string]any{"secretRef": map[string]any{"name": "s"}, "provider": map[string]any{}})},
		"CredentialsBinding without provider":         {CredentialsBinding, cb(map[string]any{"credentialsRef": secretRef})},
		"CredentialsBinding with two providers":       {CredentialsBinding, cb(map[string]any{"credentialsRef": secretRef, "provider": map[string]any{"type": "aws,gcp"}})},
		"CredentialsBinding without credentialsRef":   {CredentialsBinding, cb(map[string]any{"provider": map[string]any{"type": "aws"}})},
		"CredentialsBinding without credentials kind": {CredentialsBinding, cb(map[string]any{"provider": map[string]any{"type": "aws"}, "credentialsRef": map[string]any{"apiVersion": "v1", "name": "s"}})},
		"CredentialsBinding naming a ConfigMap":       {CredentialsBinding, cb(map[string]any{"provider": map[string]any{"type": "aws"}, "credentialsRef": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "s"}})},
	} {
		err := create(c.kind, c.obj)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", name, err)
	}

	require.NoError(t, create(CredentialsBinding, cb(map[string]any{"provider": map[string]any{"type": "aws"}, "credentialsRef": secretRef})))
	b, err := dyn.Resource(CredentialsBindingGVR).Namespace(ns).Get(context.Background(), "b", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(b.Object, "gcp", "provider", "type"))
	_, err = dyn.Resource(CredentialsBindingGVR).Namespace(ns).Update(context.Background(), b, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "provider is immutable: %v", err)

	b, err = dyn.Resource(CredentialsBindingGVR).Namespace(ns).Get(context.Background(), "b", metav1.GetOptions{})
	require.NoError(t, err)
	b.SetLabels(map[string]string{LabelHyperscalerType: "aws", LabelTenantName: "ga"})
	_, err = dyn.Resource(CredentialsBindingGVR).Namespace(ns).Update(context.Background(), b, metav1.UpdateOptions{})
	assert.NoError(t, err, "labels are what the pool writes")
}
