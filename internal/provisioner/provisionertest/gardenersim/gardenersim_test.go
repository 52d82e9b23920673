package gardenersim_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest/gardenersim"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func client(t *testing.T, kc []byte) dynamic.Interface {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	d, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return d
}

// shoot is a valid OpenStack Shoot of Kubernetes 1.34.
func shoot(name string) *unstructured.Unstructured {
	s := &unstructured.Unstructured{}
	_ = json.Unmarshal([]byte(`{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
	 "spec": {"cloudProfile": {"kind": "CloudProfile", "name": "converged-cloud"}, "region": "eu-de-1",
	  "credentialsBindingName": "openstack-binding", "kubernetes": {"version": "1.34.1"},
	  "provider": {"type": "openstack",
	   "infrastructureConfig": {"apiVersion": "openstack.provider.extensions.gardener.cloud/v1alpha1", "kind": "InfrastructureConfig", "floatingPoolName": "fip", "networks": {"workers": "10.250.0.0/16"}},
	   "controlPlaneConfig": {"apiVersion": "openstack.provider.extensions.gardener.cloud/v1alpha1", "kind": "ControlPlaneConfig", "loadBalancerProvider": "f5"}}}}`), &s.Object)
	s.SetName(name)
	return s
}

func assertInvalid(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	var fields []string
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	assert.Contains(t, fields, field, err.Error())
}

// TestRejectsWhatGardenerRejects: Shoot writes through the simulator's API are checked against
// the contract, on create, update and patch.
func TestRejectsWhatGardenerRejects(t *testing.T) {
	ctx := context.Background()
	sim := gardenersim.StartSim(t, gardenersim.Options{APIOnly: true})
	shoots := client(t, sim.Kubeconfig).Resource(kubetest.ShootGVR).Namespace("garden-" + sim.Project)

	for field, mutate := range map[string]func(s *unstructured.Unstructured){
		"spec.cloudProfile.name": func(s *unstructured.Unstructured) { unstructured.RemoveNestedField(s.Object, "spec", "cloudProfile") },
		"spec.secretBindingName": func(s *unstructured.Unstructured) {
			unstructured.RemoveNestedField(s.Object, "spec", "credentialsBindingName")
		},
		"spec.provider.infrastructureConfig.floatingPoolName": func(s *unstructured.Unstructured) {
			unstructured.RemoveNestedField(s.Object, "spec", "provider", "infrastructureConfig", "floatingPoolName")
		},
		"spec.provider.controlPlaneConfig.loadBalancerProvider": func(s *unstructured.Unstructured) {
			unstructured.RemoveNestedField(s.Object, "spec", "provider", "controlPlaneConfig", "loadBalancerProvider")
		},
		"spec.cloudProfileName": func(s *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(s.Object, "converged-cloud", "spec", "cloudProfileName")
		},
	} {
		s := shoot("bad")
		mutate(s)
		_, err := shoots.Create(ctx, s, metav1.CreateOptions{})
		assertInvalid(t, err, field)
	}
	both := shoot("both")
	_ = unstructured.SetNestedField(both.Object, "1.33.2", "spec", "kubernetes", "version")
	_ = unstructured.SetNestedField(both.Object, "openstack-secret", "spec", "secretBindingName")
	_, err := shoots.Create(ctx, both, metav1.CreateOptions{})
	assertInvalid(t, err, "spec.secretBindingName")
	_, err = shoots.Get(ctx, "bad", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "nothing rejected was stored")

	created, err := shoots.Create(ctx, shoot("good"), metav1.CreateOptions{})
	require.NoError(t, err)
	unstructured.RemoveNestedField(created.Object, "spec", "cloudProfile")
	_, err = shoots.Update(ctx, created, metav1.UpdateOptions{})
	assertInvalid(t, err, "spec.cloudProfile.name")
	_, err = shoots.Patch(ctx, "good", types.MergePatchType, []byte(`{"spec": {"secretBindingName": "s"}}`), metav1.PatchOptions{})
	assertInvalid(t, err, "spec.secretBindingName")
	_, err = shoots.Patch(ctx, "good", types.MergePatchType, []byte(`{"metadata": {"annotations": {"confirmation.gardener.cloud/deletion": "true"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	got, err := shoots.Get(ctx, "good", metav1.GetOptions{})
	require.NoError(t, err)
	v, _, _ := unstructured.NestedString(got.Object, "spec", "secretBindingName")
	assert.Empty(t, v, "the rejected patch was not applied")
	assert.NotEmpty(t, sim.Rejected())
}

func adminKubeconfig(ctx context.Context, shoots dynamic.ResourceInterface, name string, seconds any) (*unstructured.Unstructured, error) {
	req := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.gardener.cloud/v1alpha1", "kind": "AdminKubeconfigRequest",
		"metadata": map[string]any{"name": name},
	}}
	if seconds != nil {
		req.Object["spec"] = map[string]any{"expirationSeconds": seconds}
	}
	return shoots.Create(ctx, req, metav1.CreateOptions{}, "adminkubeconfig")
}

// TestAdminKubeconfig: POST shoots/{name}/adminkubeconfig issues a working kubeconfig for a
// Shoot that advertises its API server, with the expiration checked and capped as Gardener does.
func TestAdminKubeconfig(t *testing.T) {
	ctx := context.Background()
	sim := gardenersim.StartSim(t, gardenersim.Options{MaxKubeconfigExpiration: 2 * time.Hour})
	shoots := client(t, sim.Kubeconfig).Resource(kubetest.ShootGVR).Namespace("garden-" + sim.Project)

	_, err := adminKubeconfig(ctx, shoots, "missing", nil)
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = shoots.Create(ctx, shoot("stuck-1"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := shoots.Get(ctx, "stuck-1", metav1.GetOptions{})
		return err == nil && s.Object["status"] != nil
	}, 10*time.Second, 50*time.Millisecond)
	_, err = adminKubeconfig(ctx, shoots, "stuck-1", nil)
	assertInvalid(t, err, "status.status")

	_, err = shoots.Create(ctx, shoot("ready"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := shoots.Get(ctx, "ready", metav1.GetOptions{})
		addrs, _, _ := unstructured.NestedSlice(s.Object, "status", "advertisedAddresses")
		return err == nil && len(addrs) > 0
	}, 10*time.Second, 50*time.Millisecond)

	_, err = adminKubeconfig(ctx, shoots, "ready", int64(300))
	assertInvalid(t, err, "spec.expirationSeconds")

	for _, c := range []struct {
		ask  any
		want time.Duration
	}{{nil, time.Hour}, {int64(900), 15 * time.Minute}, {int64(86400), 2 * time.Hour}} {
		before := time.Now()
		out, err := adminKubeconfig(ctx, shoots, "ready", c.ask)
		require.NoError(t, err)
		enc, _, _ := unstructured.NestedString(out.Object, "status", "kubeconfig")
		kc, err := base64.StdEncoding.DecodeString(enc)
		require.NoError(t, err)
		exp, _, _ := unstructured.NestedString(out.Object, "status", "expirationTimestamp")
		expiresAt, err := time.Parse(time.RFC3339, exp)
		require.NoError(t, err)
		assert.WithinDuration(t, before.Add(c.want), expiresAt, time.Minute, "asked %v", c.ask)

		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
		require.NoError(t, err, "the admin kubeconfig opens the runtime")
	}
	reqs := sim.AdminKubeconfigRequests()
	require.Len(t, reqs, 3)
	assert.Equal(t, int64(86400), reqs[2].Requested)
	assert.Equal(t, int64(7200), reqs[2].Issued)
}
