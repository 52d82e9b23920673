// Package e2e runs the embedded provisioner against a real kube-apiserver: the gardener
// backend creates real Shoot resources and the runtime steps write real Secrets, Kyma and
// CompassConnection resources, while a test controller plays Gardener, the lifecycle manager
// and the Runtime Agent.
package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest/gardenersim"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

var (
	shootGVR = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}
	kymaGVR  = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}
)

const tenant = "tenant-e2e"

type env struct {
	t       *testing.T
	client  client.Client
	dyn     dynamic.Interface
	core    kubernetes.Interface
	project string
	sim     *gardenersim.Sim
	store   storage.Store
}

func setup(t *testing.T, cfg config.Config) *env {
	return setupWith(t, cfg, func(project string, kc []byte) string {
		return fmt.Sprintf(`{"gardener": {"type": "gardener", "spec": {"project": %q, "kubeconfig": %q}}}`, project, string(kc))
	})
}

// setupWith starts the fake Gardener and a provisioner whose backend set is set(project, kubeconfig).
func setupWith(t *testing.T, cfg config.Config, set func(project string, kubeconfig []byte) string) *env {
	t.Helper()
	sim := gardenersim.StartSim(t, gardenersim.Options{PlayAgent: true})
	project, kc := sim.Project, sim.Kubeconfig
	p := provisionertest.New(t, provisionertest.Options{
		Backends: infrastructure.Config{SetJSON: set(project, kc)},
		Clusters: runtimeclient.Clusters{},
		Config:   &cfg,
	})
	return &env{t: t, client: p.Provisioner.Service, dyn: kubetest.Dynamic(t), core: kubetest.Clientset(t), project: project, sim: sim, store: p.Store}
}

// startFakeGardener runs the fake Gardener (playing the Runtime Agent too) on a new project until
// the test ends; it returns the project and the kubeconfig of Gardener's API.
func startFakeGardener(t *testing.T) (string, []byte) {
	t.Helper()
	return gardenersim.Start(t, gardenersim.Options{PlayAgent: true})
}

func defaultConfig(t *testing.T) config.Config {
	cfg, err := config.Load()
	require.NoError(t, err)
	return cfg
}

func (e *env) shoot(name string) (*unstructured.Unstructured, error) {
	return e.dyn.Resource(shootGVR).Namespace("garden-"+e.project).Get(context.Background(), name, metav1.GetOptions{})
}

func input(name string) gqlschema.ProvisionRuntimeInput {
	in := contracttest.ProvisionInput(name)
	in.ClusterConfig.GardenerConfig.Name = &name
	in.ClusterConfig.Administrators = []string{"admin@example.com"}
	return in
}

func wait(t *testing.T, c client.Client, opID string, want gqlschema.OperationState) *gqlschema.OperationStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := c.RuntimeOperationStatus(context.Background(), tenant, opID)
		require.NoError(t, err)
		if st.State == want {
			return st
		}
		if st.State == gqlschema.OperationStateSucceeded || st.State == gqlschema.OperationStateFailed || time.Now().After(deadline) {
			t.Fatalf("operation %s is %s (want %s): %+v %s", opID, st.State, want, st.LastError, deref(st.Message))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGardenerRuntimeLifecycle(t *testing.T) {
	e := setup(t, defaultConfig(t))
	ctx := context.Background()

	st, err := e.client.ProvisionRuntime(ctx, tenant, input("life-1"))
	require.NoError(t, err)
	assert.Equal(t, gqlschema.OperationTypeProvision, st.Operation)
	done := wait(t, e.client, *st.ID, gqlschema.OperationStateSucceeded)
	runtimeID := *st.RuntimeID
	require.NotNil(t, done.CompassRuntimeID, "registered in the Director")

	shoot, err := e.shoot("life-1")
	require.NoError(t, err)
	assert.Equal(t, runtimeID, shoot.GetAnnotations()["kcp.provisioner.kyma-project.io/runtime-id"])
	assert.Equal(t, tenant, shoot.GetLabels()["account"])
	version, _, _ := unstructured.NestedString(shoot.Object, "spec", "kubernetes", "version")
	assert.Equal(t, "1.30", version)

	// The runtime steps wrote into the runtime (this API server).
	secret, err := e.core.CoreV1().Secrets(runtimeclient.AgentConfigNamespace).Get(ctx, runtimeclient.AgentConfigSecret, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, tenant, string(secret.Data["TENANT"]))
	assert.NotEmpty(t, secret.Data["TOKEN"])
	assert.Equal(t, *done.CompassRuntimeID, string(secret.Data["RUNTIME_ID"]))
	bindings, err := e.core.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: "kyma-project.io/operator-binding=true"})
	require.NoError(t, err)
	assert.NotEmpty(t, bindings.Items)

	status, err := e.client.RuntimeStatus(ctx, tenant, runtimeID)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, status.RuntimeConnectionStatus.Status)
	require.NotNil(t, status.RuntimeConfiguration.Kubeconfig)
	// The kubeconfig is an admin kubeconfig from shoots/{name}/adminkubeconfig (Gardener's
	// default hour), not the Gardener cluster's own.
	kc := *status.RuntimeConfiguration.Kubeconfig
	assert.NotEqual(t, string(kubetest.Kubeconfig(t)), kc)
	start, end, ok := infrastructure.KubeconfigValidity(kc)
	require.True(t, ok, "the admin kubeconfig's validity is readable")
	assert.Equal(t, time.Hour, end.Sub(start))
	issued := len(e.sim.AdminKubeconfigRequests())
	require.NotZero(t, issued)
	assert.Equal(t, "life-1", e.sim.AdminKubeconfigRequests()[0].Shoot)

	// A stored kubeconfig that is due (here one whose validity cannot be read, as the static
	// ones Gardener no longer honours) is renewed before it is handed out, and stored.
	legacy := string(kubetest.Kubeconfig(t))
	require.NoError(t, e.store.Runtimes().SetRuntimeFields(ctx, runtimeID, storage.RuntimeFields{Kubeconfig: &legacy}))
	status, err = e.client.RuntimeStatus(ctx, tenant, runtimeID)
	require.NoError(t, err)
	renewed := *status.RuntimeConfiguration.Kubeconfig
	assert.NotEqual(t, legacy, renewed)
	assert.Equal(t, kc, renewed, "the backend's current admin kubeconfig, still far from due")
	assert.Len(t, e.sim.AdminKubeconfigRequests(), issued, "which it did not need to ask Gardener for again")
	rt, err := e.store.Runtimes().GetRuntime(ctx, runtimeID)
	require.NoError(t, err)
	assert.Equal(t, renewed, rt.Secrets[storage.KubeconfigSecret])
	status, err = e.client.RuntimeStatus(ctx, tenant, runtimeID)
	require.NoError(t, err)
	assert.Equal(t, renewed, *status.RuntimeConfiguration.Kubeconfig, "not due: the same one")

	up, err := e.client.UpgradeShoot(ctx, tenant, runtimeID, contracttest.UpgradeShootInput())
	require.NoError(t, err)
	wait(t, e.client, *up.ID, gqlschema.OperationStateSucceeded)
	shoot, err = e.shoot("life-1")
	require.NoError(t, err)
	version, _, _ = unstructured.NestedString(shoot.Object, "spec", "kubernetes", "version")
	assert.Equal(t, "1.31", version)

	hib, err := e.client.HibernateRuntime(ctx, tenant, runtimeID)
	require.NoError(t, err)
	wait(t, e.client, *hib.ID, gqlschema.OperationStateSucceeded)
	shoot, err = e.shoot("life-1")
	require.NoError(t, err)
	hibernated, _, _ := unstructured.NestedBool(shoot.Object, "status", "hibernated")
	assert.True(t, hibernated)

	depID, err := e.client.DeprovisionRuntime(ctx, tenant, runtimeID)
	require.NoError(t, err)
	wait(t, e.client, depID, gqlschema.OperationStateSucceeded)
	_, err = e.shoot("life-1")
	assert.True(t, apierrors.IsNotFound(err), "the Shoot is deleted: %v", err)
	_, err = e.client.RuntimeStatus(ctx, tenant, runtimeID)
	assert.Error(t, err, "a deprovisioned runtime is not found")
}

func TestStuckShootTimesOutNamingTheStage(t *testing.T) {
	cfg := defaultConfig(t)
	cfg.Provisioning.ClusterCreation = 2 * time.Second
	e := setup(t, cfg)
	st, err := e.client.ProvisionRuntime(context.Background(), tenant, input("stuck-1"))
	require.NoError(t, err)
	failed := wait(t, e.client, *st.ID, gqlschema.OperationStateFailed)
	require.NotNil(t, failed.LastError)
	assert.Equal(t, "step Wait_For_Cluster_Creation: stage WaitingForClusterCreation exceeded its time limit of 2s", failed.LastError.ErrMessage)
	assert.Equal(t, "WaitingForClusterCreation", failed.LastError.Reason)
}

func TestFailedShootFailsWithGardenersReason(t *testing.T) {
	e := setup(t, defaultConfig(t))
	st, err := e.client.ProvisionRuntime(context.Background(), tenant, input("fail-1"))
	require.NoError(t, err)
	failed := wait(t, e.client, *st.ID, gqlschema.OperationStateFailed)
	require.NotNil(t, failed.LastError)
	assert.Contains(t, failed.LastError.ErrMessage, gardenersim.QuotaError)
}

func sleep() { time.Sleep(50 * time.Millisecond) }
