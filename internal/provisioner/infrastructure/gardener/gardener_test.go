package gardener_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// project creates the namespace garden-<random project> and returns the project's name.
func project(t *testing.T) string {
	t.Helper()
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	p := "p" + hex.EncodeToString(b[:])
	cs := kubetest.Clientset(t)
	ctx := context.Background()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden-" + p}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), "garden-"+p, metav1.DeleteOptions{}) })
	return p
}

func newBackend(t *testing.T) (*gardener.Backend, dynamic.ResourceInterface) {
	t.Helper()
	p := project(t)
	b, err := gardener.Factory(context.Background(), infrastructure.Entry{Name: "gardener", Type: gardener.Type,
		Spec: mustJSON(t, map[string]any{"project": p, "kubeconfig": string(kubetest.Kubeconfig(t)), "audit_logs_policy_config_map": "audit-policy", "audit_logs_tenant": "tenant-x"})},
		infrastructure.Deps{})
	require.NoError(t, err)
	gb := b.(*gardener.Backend)
	require.Equal(t, "garden-"+p, gb.Namespace())
	return gb, kubetest.Dynamic(t).Resource(kubetest.ShootGVR).Namespace("garden-" + p)
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func clusterSpec() infrastructure.Spec {
	return infrastructure.Spec{
		RuntimeID: "3f6a8c1e-0d2b-4c9a-9e1f-123456789abc", OperationID: "op-1", Name: "my-runtime",
		Tenant: "ga-1", SubAccountID: "sa-1",
		Cluster: infrastructure.ClusterConfig{
			KubernetesVersion: "1.30.5", Provider: "GCP", Region: "europe-west3", TargetSecret: "gcp-secret",
			MachineType: "n2-standard-4", MachineImage: "gardenlinux", MachineImageVer: "1443.3.0", DiskType: "pd-standard",
			VolumeSizeGB: 50, WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 10, MaxSurge: 4, MaxUnavailable: 1,
			Purpose: "production", Seed: "gcp-eu1",
			ProviderConfig: json.RawMessage(`{"zones": ["europe-west3-a", "europe-west3-b"]}`),
		},
	}
}

// gardenerReports plays Gardener: it sets the domain and the status of the Shoot.
func gardenerReports(t *testing.T, shoots dynamic.ResourceInterface, name, domain, state, description string, hibernated bool) {
	t.Helper()
	ctx := context.Background()
	s, err := shoots.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	if domain != "" {
		require.NoError(t, unstructured.SetNestedField(s.Object, domain, "spec", "dns", "domain"))
		s, err = shoots.Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, unstructured.SetNestedMap(s.Object, map[string]any{
		"observedGeneration": s.GetGeneration(),
		"hibernated":         hibernated,
		"lastOperation":      map[string]any{"type": "Reconcile", "state": state, "description": description, "progress": int64(100)},
	}, "status"))
	_, err = shoots.UpdateStatus(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestCreateAndReconcile(t *testing.T) {
	ctx := context.Background()
	b, shoots := newBackend(t)
	spec := clusterSpec()
	name := gardener.ShootName(spec)
	assert.Equal(t, "c-3f6a8c1", name, "derived from the runtime ID when the cluster has no name")

	_, err := b.Status(ctx, spec)
	require.ErrorIs(t, err, infrastructure.ErrNotFound)
	require.NoError(t, b.Create(ctx, spec))
	require.NoError(t, b.Create(ctx, spec), "creating again is idempotent")

	s, err := shoots.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, spec.RuntimeID, s.GetAnnotations()[gardener.AnnotationRuntimeID])
	assert.Equal(t, "op-1", s.GetAnnotations()[gardener.AnnotationOperationID])
	assert.Equal(t, map[string]string{"account": "ga-1", "subaccount": "sa-1"}, s.GetLabels())
	str := func(path ...string) string {
		v, _, err := unstructured.NestedString(s.Object, path...)
		require.NoError(t, err)
		return v
	}
	assert.Equal(t, "1.30.5", str("spec", "kubernetes", "version"))
	assert.Equal(t, "gcp", str("spec", "provider", "type"))
	assert.Equal(t, "europe-west3", str("spec", "region"))
	assert.Equal(t, "gcp-secret", str("spec", "secretBindingName"))
	assert.Equal(t, "10.250.0.0/16", str("spec", "networking", "nodes"))
	assert.Equal(t, "production", str("spec", "purpose"))
	assert.Equal(t, "gcp-eu1", str("spec", "seedName"))
	assert.Equal(t, "audit-policy", str("spec", "kubernetes", "kubeAPIServer", "auditConfig", "auditPolicy", "configMapRef", "name"))
	assert.Equal(t, "europe-west3-a", str("spec", "provider", "controlPlaneConfig", "zone"))
	workers, _, err := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	require.NoError(t, err)
	require.Len(t, workers, 1)
	assert.Equal(t, map[string]any{
		"name":           gardener.WorkerName,
		"machine":        map[string]any{"type": "n2-standard-4", "image": map[string]any{"name": "gardenlinux", "version": "1443.3.0"}},
		"volume":         map[string]any{"type": "pd-standard", "size": "50Gi"},
		"minimum":        int64(3),
		"maximum":        int64(10),
		"maxSurge":       int64(4),
		"maxUnavailable": int64(1),
		"zones":          []any{"europe-west3-a", "europe-west3-b"},
	}, workers[0])

	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.Status{Phase: infrastructure.PhaseInProgress}, st, "Gardener has not observed the Shoot yet")

	gardenerReports(t, shoots, name, "c-3f6a8c1.kyma.example.com", "Processing", "", false)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.Status{Domain: "c-3f6a8c1.kyma.example.com", Phase: infrastructure.PhaseInProgress}, st)

	gardenerReports(t, shoots, name, "", "Succeeded", "", false)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)
	gen := mustGet(t, shoots, name).GetGeneration()
	assert.Equal(t, gen, st.ObservedRevision)

	// Kubeconfig: from the Secret <shoot>.kubeconfig, once Gardener wrote it.
	_, err = b.Kubeconfig(ctx, spec)
	assert.ErrorContains(t, err, "does not exist yet")
	_, err = kubetest.Clientset(t).CoreV1().Secrets(b.Namespace()).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + ".kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": []byte("apiVersion: v1\nkind: Config\n")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kc, err := b.Kubeconfig(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, "apiVersion: v1\nkind: Config\n", kc)
}

func mustGet(t *testing.T, shoots dynamic.ResourceInterface, name string) *unstructured.Unstructured {
	t.Helper()
	s, err := shoots.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func TestCreateFailsAndOtherRuntime(t *testing.T) {
	ctx := context.Background()
	b, shoots := newBackend(t)
	spec := clusterSpec()
	spec.Cluster.Name = "named"
	require.NoError(t, b.Create(ctx, spec))

	other := spec
	other.RuntimeID = "another-runtime"
	err := b.Create(ctx, other)
	assert.ErrorContains(t, err, "belongs to runtime")
	_, err = b.Status(ctx, other)
	assert.ErrorContains(t, err, "belongs to runtime")
	assert.Error(t, b.Delete(ctx, other), "never deletes another runtime's Shoot")
	mustGet(t, shoots, "named")

	for _, state := range []string{"Failed", "Error", "Aborted"} {
		gardenerReports(t, shoots, "named", "named.example.com", state, "quota exceeded", false)
		st, err := b.Status(ctx, spec)
		require.NoError(t, err)
		assert.Equal(t, infrastructure.PhaseFailed, st.Phase, state)
		assert.Equal(t, "quota exceeded", st.Reason)
	}

	bad := clusterSpec()
	bad.RuntimeID, bad.Cluster.Region = "rt-bad", ""
	assert.ErrorContains(t, b.Create(ctx, bad), "region")
}

func TestUpdateHibernateDelete(t *testing.T) {
	ctx := context.Background()
	b, shoots := newBackend(t)
	spec := clusterSpec()
	name := gardener.ShootName(spec)
	require.NoError(t, b.Create(ctx, spec))
	gardenerReports(t, shoots, name, "d.example.com", "Succeeded", "", false)
	before := mustGet(t, shoots, name).GetGeneration()

	upd := spec
	upd.OperationID = "op-2"
	upd.Cluster = infrastructure.ClusterConfig{KubernetesVersion: "1.31.1", MachineType: "n2-standard-8", AutoScalerMax: 20, VolumeSizeGB: 80}
	rev, err := b.Update(ctx, upd)
	require.NoError(t, err)
	assert.Greater(t, rev, before)
	s := mustGet(t, shoots, name)
	assert.Equal(t, rev, s.GetGeneration())
	assert.Equal(t, "op-2", s.GetAnnotations()[gardener.AnnotationOperationID])
	v, _, _ := unstructured.NestedString(s.Object, "spec", "kubernetes", "version")
	assert.Equal(t, "1.31.1", v)
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	w := workers[0].(map[string]any)
	assert.Equal(t, "n2-standard-8", w["machine"].(map[string]any)["type"])
	assert.Equal(t, "gardenlinux", w["machine"].(map[string]any)["image"].(map[string]any)["name"], "unset fields are kept")
	assert.Equal(t, int64(20), w["maximum"])
	assert.Equal(t, int64(3), w["minimum"])
	assert.Equal(t, "80Gi", w["volume"].(map[string]any)["size"])
	region, _, _ := unstructured.NestedString(s.Object, "spec", "region")
	assert.Equal(t, "europe-west3", region)

	st, err := b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.PhaseInProgress, st.Phase, "Gardener has not observed the new generation")
	assert.Less(t, st.ObservedRevision, rev)
	gardenerReports(t, shoots, name, "", "Succeeded", "", false)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, rev, st.ObservedRevision)
	assert.Equal(t, infrastructure.PhaseSucceeded, st.Phase)

	require.NoError(t, b.Hibernate(ctx, spec))
	enabled, _, _ := unstructured.NestedBool(mustGet(t, shoots, name).Object, "spec", "hibernation", "enabled")
	assert.True(t, enabled)
	gardenerReports(t, shoots, name, "", "Succeeded", "", true)
	st, err = b.Status(ctx, spec)
	require.NoError(t, err)
	assert.True(t, st.Hibernated)

	gone, err := b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone)
	require.NoError(t, b.Delete(ctx, spec))
	_, err = shoots.Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no finalizers: the API server removes it at once (%v)", err)
	gone, err = b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.True(t, gone)
	require.NoError(t, b.Delete(ctx, spec), "deleting a missing Shoot is fine")
}

func TestDeleteConfirmsFirst(t *testing.T) {
	ctx := context.Background()
	b, shoots := newBackend(t)
	spec := clusterSpec()
	name := gardener.ShootName(spec)
	require.NoError(t, b.Create(ctx, spec))
	// A finalizer keeps the Shoot around after the delete call, as Gardener's would.
	s := mustGet(t, shoots, name)
	s.SetFinalizers([]string{"gardener"})
	_, err := shoots.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)

	require.NoError(t, b.Delete(ctx, spec))
	s = mustGet(t, shoots, name)
	assert.Equal(t, "true", s.GetAnnotations()[gardener.AnnotationConfirmDeletion])
	assert.NotNil(t, s.GetDeletionTimestamp())
	gone, err := b.Deleted(ctx, spec)
	require.NoError(t, err)
	assert.False(t, gone)
	require.NoError(t, b.Delete(ctx, spec), "deleting again while Gardener works is fine")

	s.SetFinalizers(nil)
	_, err = shoots.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		gone, err := b.Deleted(ctx, spec)
		return err == nil && gone
	}, 10*time.Second, 100*time.Millisecond)
}

func TestSpecValidation(t *testing.T) {
	for raw, want := range map[string]string{
		`{"kubeconfig": "x"}`: "spec.project is required",
		`{"project": "p"}`:    "kubeconfig or kubeconfig_path is required",
		`{"project": "p", "kubeconfig": "x", "kubeconfig_path": "y"}`: "not both",
		`{"project": "p", "kubeconfig_path": "/nonexistent"}`:         "reading kubeconfig",
		`{"project": "p", "kubeconfig": "x", "region": "eu"}`:         `unknown field "region"`,
	} {
		_, err := gardener.Factory(context.Background(), infrastructure.Entry{Name: "g", Type: gardener.Type, Spec: json.RawMessage(raw)}, infrastructure.Deps{})
		assert.ErrorContains(t, err, want, raw)
	}
}
