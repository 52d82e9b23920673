package gardener_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest/gardenersim"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// newBackend starts Gardener's API (gardenersim, without its controller: the tests report the
// Shoots' status themselves) and a backend on it; shoots are the project's Shoots on the
// kube-apiserver directly.
func newBackend(t *testing.T) (*gardener.Backend, dynamic.ResourceInterface, *gardenersim.Sim) {
	return newBackendWith(t, nil)
}

// newBackendWith is newBackend with more spec fields.
func newBackendWith(t *testing.T, extra map[string]any) (*gardener.Backend, dynamic.ResourceInterface, *gardenersim.Sim) {
	t.Helper()
	sim := gardenersim.StartSim(t, gardenersim.Options{APIOnly: true})
	spec := map[string]any{"project": sim.Project, "kubeconfig": string(sim.Kubeconfig),
		"audit_logs_policy_config_map": "audit-policy", "audit_logs_tenant": "tenant-x",
		"audit_log_service_url": "https://auditlog.example.com:3001", "audit_log_secret_name": "auditlog-secret",
		"kubeconfig_expiration_seconds": 900}
	for k, v := range extra {
		spec[k] = v
	}
	b, err := gardener.Factory(context.Background(), infrastructure.Entry{Name: "gardener", Type: gardener.Type,
		Spec: mustJSON(t, spec)}, infrastructure.Deps{})
	require.NoError(t, err)
	gb := b.(*gardener.Backend)
	require.Equal(t, "garden-"+sim.Project, gb.Namespace())
	return gb, kubetest.Dynamic(t).Resource(kubetest.ShootGVR).Namespace("garden-" + sim.Project), sim
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
		"observedGeneration":  s.GetGeneration(),
		"advertisedAddresses": []any{map[string]any{"name": "external", "url": kubetest.RESTConfig(t).Host}},
		"hibernated":          hibernated,
		"lastOperation":       map[string]any{"type": "Reconcile", "state": state, "description": description, "progress": int64(100)},
	}, "status"))
	_, err = shoots.UpdateStatus(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestCreateAndReconcile(t *testing.T) {
	ctx := context.Background()
	b, shoots, sim := newBackend(t)
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
	assert.Equal(t, "gcp-secret", str("spec", "secretBindingName"), "below Kubernetes 1.34")
	assert.Empty(t, str("spec", "credentialsBindingName"))
	assert.Equal(t, "gcp", str("spec", "cloudProfile", "name"), "the original provisioner's GCP profile")
	assert.Equal(t, "CloudProfile", str("spec", "cloudProfile", "kind"))
	assert.Equal(t, "gcp", str("spec", "cloudProfileName"), "below Kubernetes 1.34")
	ext, _, _ := unstructured.NestedSlice(s.Object, "spec", "extensions")
	// The audit log extension and, as the original provisioner always wrote it, the networking
	// filter (enabled: the ClusterConfig here does not disable it).
	require.Len(t, ext, 2)
	assert.Equal(t, map[string]any{"type": "shoot-networking-filter", "disabled": false}, ext[1])
	assert.Equal(t, map[string]any{"type": "shoot-auditlog-service", "providerConfig": map[string]any{
		"apiVersion": "service.auditlog.extensions.gardener.cloud/v1alpha1", "kind": "AuditlogConfig", "type": "standard",
		"tenantID": "tenant-x", "serviceURL": "https://auditlog.example.com:3001", "secretReferenceName": "auditlog-credentials",
	}}, ext[0])
	res, _, _ := unstructured.NestedSlice(s.Object, "spec", "resources")
	assert.Equal(t, []any{map[string]any{"name": "auditlog-credentials",
		"resourceRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "auditlog-secret"}}}, res)
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

	// Kubeconfig: from shoots/{name}/adminkubeconfig, for the configured 15 minutes, the same
	// one until two thirds of it have passed.
	c, err := b.KubeconfigCredentials(ctx, spec)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(15*time.Minute), c.ExpiresAt, time.Minute)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(c.Kubeconfig))
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(t, err, "the admin kubeconfig opens the runtime")
	kc, err := b.Kubeconfig(ctx, spec)
	require.NoError(t, err)
	assert.Equal(t, c.Kubeconfig, kc, "not due yet: the same kubeconfig")
	reqs := sim.AdminKubeconfigRequests()
	require.Len(t, reqs, 1)
	assert.Equal(t, int64(900), reqs[0].Requested)
	assert.Equal(t, name, reqs[0].Shoot)
	assert.False(t, infrastructure.KubeconfigDue(kc, time.Now()))
	assert.True(t, infrastructure.KubeconfigDue(kc, time.Now().Add(11*time.Minute)), "due after two thirds of 15 minutes")

	b.SetClock(func() time.Time { return time.Now().Add(11 * time.Minute) })
	kc2, err := b.Kubeconfig(ctx, spec)
	require.NoError(t, err)
	assert.NotEqual(t, kc, kc2, "due: a new kubeconfig")
	assert.Len(t, sim.AdminKubeconfigRequests(), 2)
}

func mustGet(t *testing.T, shoots dynamic.ResourceInterface, name string) *unstructured.Unstructured {
	t.Helper()
	s, err := shoots.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func TestCreateFailsAndOtherRuntime(t *testing.T) {
	ctx := context.Background()
	b, shoots, _ := newBackend(t)
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
	b, shoots, _ := newBackend(t)
	spec := clusterSpec()
	name := gardener.ShootName(spec)
	require.NoError(t, b.Create(ctx, spec))
	gardenerReports(t, shoots, name, "d.example.com", "Succeeded", "", false)
	before := mustGet(t, shoots, name).GetGeneration()

	upd := spec
	upd.OperationID = "op-2"
	upd.Cluster = infrastructure.ClusterConfig{KubernetesVersion: "1.34.1", MachineType: "n2-standard-8", AutoScalerMax: 20, VolumeSizeGB: 80}
	rev, err := b.Update(ctx, upd)
	require.NoError(t, err)
	assert.Greater(t, rev, before)
	s := mustGet(t, shoots, name)
	assert.Equal(t, rev, s.GetGeneration())
	assert.Equal(t, "op-2", s.GetAnnotations()[gardener.AnnotationOperationID])
	v, _, _ := unstructured.NestedString(s.Object, "spec", "kubernetes", "version")
	assert.Equal(t, "1.34.1", v)
	// Upgraded to 1.34: off the fields Gardener forbids from then on.
	binding, _, _ := unstructured.NestedString(s.Object, "spec", "credentialsBindingName")
	assert.Equal(t, "gcp-secret", binding)
	_, found, _ := unstructured.NestedString(s.Object, "spec", "secretBindingName")
	assert.False(t, found)
	_, found, _ = unstructured.NestedString(s.Object, "spec", "cloudProfileName")
	assert.False(t, found)
	profile, _, _ := unstructured.NestedString(s.Object, "spec", "cloudProfile", "name")
	assert.Equal(t, "gcp", profile)
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
	b, shoots, _ := newBackend(t)
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
		`{"project": "p", "kubeconfig": "x", "kubeconfig_path": "y"}`:                                                                      "not both",
		`{"project": "p", "kubeconfig_path": "/nonexistent"}`:                                                                              "reading kubeconfig",
		`{"project": "p", "kubeconfig": "x", "region": "eu"}`:                                                                              `unknown field "region"`,
		`{"project": "p", "kubeconfig": "x", "audit_logs_tenant": "t"}`:                                                                    "needs spec.audit_log_service_url and spec.audit_log_secret_name",
		`{"project": "p", "kubeconfig": "x", "audit_logs_tenant": "t", "audit_log_service_url": "auditlog", "audit_log_secret_name": "s"}`: "absolute URL",
		`{"project": "p", "kubeconfig": "x", "kubeconfig_expiration_seconds": 300}`:                                                        "between 600 and 4294967295",
	} {
		_, err := gardener.Factory(context.Background(), infrastructure.Entry{Name: "g", Type: gardener.Type, Spec: json.RawMessage(raw)}, infrastructure.Deps{})
		assert.ErrorContains(t, err, want, raw)
	}
}

// TestEveryProviderThroughGardener: the Shoots of every provider, on both sides of Kubernetes
// 1.34, pass Gardener's checks (gardenersim); OpenStack's floating pool and load balancer
// provider come from the request or the configuration, its cloud profile from the request first.
func TestEveryProviderThroughGardener(t *testing.T) {
	ctx := context.Background()
	b, shoots, sim := newBackendWith(t, map[string]any{"cloud_profile_openstack": "converged-cloud-kyma",
		"cloud_profile_azure": "az-custom", "openstack_floating_pool_name": "FloatingIP-external-kyma", "openstack_load_balancer_provider": "f5"})
	configs := map[string]string{
		"AWS":       `{"awsConfig": {"vpcCidr": "10.250.0.0/16", "awsZones": [{"name": "eu-central-1a", "workerCidr": "10.250.0.0/19", "publicCidr": "10.250.32.0/20", "internalCidr": "10.250.48.0/20"}]}}`,
		"GCP":       `{"gcpConfig": {"zones": ["europe-west3-a"]}}`,
		"Azure":     `{"azureConfig": {"vnetCidr": "10.250.0.0/16", "zones": ["1"]}}`,
		"OpenStack": `{"openStackConfig": {"zones": ["eu-de-1a"]}}`,
	}
	profiles := map[string]string{"AWS": "aws", "GCP": "gcp", "Azure": "az-custom", "OpenStack": "converged-cloud-kyma"}
	for provider, pc := range configs {
		for _, version := range []string{"1.33.5", "1.34.1"} {
			spec := clusterSpec()
			spec.RuntimeID = provider + version
			spec.Cluster.Name = strings.ToLower(provider) + "-" + strings.ReplaceAll(version, ".", "")
			spec.Cluster.Provider, spec.Cluster.KubernetesVersion, spec.Cluster.ProviderConfig = provider, version, json.RawMessage(pc)
			require.NoError(t, b.Create(ctx, spec), "%s %s", provider, version)
			s := mustGet(t, shoots, spec.Cluster.Name)
			profile, _, _ := unstructured.NestedString(s.Object, "spec", "cloudProfile", "name")
			assert.Equal(t, profiles[provider], profile)
		}
	}
	assert.Empty(t, sim.Rejected())

	ost := clusterSpec()
	ost.RuntimeID, ost.Cluster.Name, ost.Cluster.Provider = "ost-own", "ost-own", "OpenStack"
	ost.Cluster.ProviderConfig = json.RawMessage(`{"openStackConfig": {"zones": ["eu-de-1a"], "floatingPoolName": "fip-own", "loadBalancerProvider": "octavia", "cloudProfileName": "openstack-own"}}`)
	require.NoError(t, b.Create(ctx, ost))
	s := mustGet(t, shoots, "ost-own")
	str := func(path ...string) string { v, _, _ := unstructured.NestedString(s.Object, path...); return v }
	assert.Equal(t, "openstack-own", str("spec", "cloudProfile", "name"))
	assert.Equal(t, "fip-own", str("spec", "provider", "infrastructureConfig", "floatingPoolName"))
	assert.Equal(t, "octavia", str("spec", "provider", "controlPlaneConfig", "loadBalancerProvider"))

	bare, _, _ := newBackend(t)
	ost.RuntimeID, ost.Cluster.Name = "ost-bare", "ost-bare"
	ost.Cluster.ProviderConfig = json.RawMessage(`{"openStackConfig": {"zones": ["eu-de-1a"]}}`)
	assert.ErrorContains(t, bare.Create(ctx, ost), "no cloud profile for provider openstack")
	ost.Cluster.ProviderConfig = json.RawMessage(`{"openStackConfig": {"zones": ["eu-de-1a"], "cloudProfileName": "openstack-own"}}`)
	assert.ErrorContains(t, bare.Create(ctx, ost), "floating pool and a load balancer provider")
}
