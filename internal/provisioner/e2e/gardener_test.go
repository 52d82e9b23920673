// Package e2e runs the embedded provisioner against a real kube-apiserver: the gardener
// backend creates real Shoot resources and the runtime steps write real Secrets, Kyma and
// CompassConnection resources, while a test controller plays Gardener, the lifecycle manager
// and the Runtime Agent.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

var (
	shootGVR      = schema.GroupVersionResource{Group: "core.gardener.cloud", Version: "v1beta1", Resource: "shoots"}
	kymaGVR       = schema.GroupVersionResource{Group: "operator.kyma-project.io", Version: "v1beta2", Resource: "kymas"}
	connectionGVR = schema.GroupVersionResource{Group: "compass.kyma-project.io", Version: "v1alpha1", Resource: "compassconnections"}
)

const tenant = "tenant-e2e"

// fakeGardener reconciles Shoots the way Gardener reports them: a DNS domain, a last
// operation per generation, hibernation, and an admin kubeconfig Secret (pointing at this
// same API server, which then serves as the runtime). Shoots named stuck-* never finish
// creation; fail-* fail it with a quota error. It also plays the lifecycle manager (Kyma
// Ready) and the Runtime Agent (CompassConnection Synchronized once its Secret exists).
type fakeGardener struct {
	t          *testing.T
	core       kubernetes.Interface
	dyn        dynamic.Interface
	namespace  string
	kubeconfig []byte
}

const quotaError = "Infrastructure creation failed: quota exceeded for n2-standard-4 in europe-west3"

func (g *fakeGardener) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := g.reconcile(ctx); err != nil && ctx.Err() == nil {
			g.t.Logf("fake gardener: %v", err)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func (g *fakeGardener) reconcile(ctx context.Context) error {
	shoots, err := g.dyn.Resource(shootGVR).Namespace(g.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range shoots.Items {
		if err := g.reconcileShoot(ctx, &shoots.Items[i]); err != nil {
			return err
		}
	}
	kymas, err := g.dyn.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range kymas.Items {
		k := &kymas.Items[i]
		if state, _, _ := unstructured.NestedString(k.Object, "status", "state"); state != runtimeclient.KymaReady {
			_ = unstructured.SetNestedField(k.Object, runtimeclient.KymaReady, "status", "state")
			if _, err := g.dyn.Resource(kymaGVR).Namespace(k.GetNamespace()).UpdateStatus(ctx, k, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	return g.playAgent(ctx)
}

func (g *fakeGardener) reconcileShoot(ctx context.Context, s *unstructured.Unstructured) error {
	name := s.GetName()
	if domain, _, _ := unstructured.NestedString(s.Object, "spec", "dns", "domain"); domain == "" {
		_ = unstructured.SetNestedField(s.Object, name+".e2e.shoot.test", "spec", "dns", "domain")
		updated, err := g.dyn.Resource(shootGVR).Namespace(g.namespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		s = updated
	}
	observed, _, _ := unstructured.NestedInt64(s.Object, "status", "observedGeneration")
	if observed == s.GetGeneration() && !strings.HasPrefix(name, "stuck-") {
		return nil
	}
	lastOp := map[string]any{"type": "Reconcile", "state": "Succeeded", "progress": int64(100), "description": "Shoot cluster has been successfully reconciled."}
	switch {
	case strings.HasPrefix(name, "stuck-"):
		lastOp = map[string]any{"type": "Create", "state": "Processing", "progress": int64(40), "description": "Waiting for infrastructure"}
	case strings.HasPrefix(name, "fail-"):
		lastOp = map[string]any{"type": "Create", "state": "Failed", "progress": int64(10), "description": quotaError}
	}
	hibernated, _, _ := unstructured.NestedBool(s.Object, "spec", "hibernation", "enabled")
	_ = unstructured.SetNestedField(s.Object, lastOp, "status", "lastOperation")
	_ = unstructured.SetNestedField(s.Object, s.GetGeneration(), "status", "observedGeneration")
	_ = unstructured.SetNestedField(s.Object, hibernated, "status", "hibernated")
	if _, err := g.dyn.Resource(shootGVR).Namespace(g.namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + ".kubeconfig", Namespace: g.namespace},
		Data: map[string][]byte{"kubeconfig": g.kubeconfig}}
	if _, err := g.core.CoreV1().Secrets(g.namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (g *fakeGardener) playAgent(ctx context.Context) error {
	_, err := g.core.CoreV1().Secrets(runtimeclient.AgentConfigNamespace).Get(ctx, runtimeclient.AgentConfigSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	conns := g.dyn.Resource(connectionGVR)
	conn, err := conns.Get(ctx, runtimeclient.CompassConnectionName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		conn = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "compass.kyma-project.io/v1alpha1", "kind": "CompassConnection",
			"metadata": map[string]any{"name": runtimeclient.CompassConnectionName},
		}}
		if conn, err = conns.Create(ctx, conn, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if state, _, _ := unstructured.NestedString(conn.Object, "status", "connectionState"); state == runtimeclient.ConnectionSynchronized {
		return nil
	}
	_ = unstructured.SetNestedField(conn.Object, runtimeclient.ConnectionSynchronized, "status", "connectionState")
	_, err = conns.UpdateStatus(ctx, conn, metav1.UpdateOptions{})
	return err
}

type env struct {
	t       *testing.T
	client  client.Client
	dyn     dynamic.Interface
	core    kubernetes.Interface
	project string
}

func setup(t *testing.T, cfg config.Config) *env {
	return setupWith(t, cfg, func(project string, kc []byte) string {
		return fmt.Sprintf(`{"gardener": {"type": "gardener", "spec": {"project": %q, "kubeconfig": %q}}}`, project, string(kc))
	})
}

// setupWith starts the fake Gardener and a provisioner whose backend set is set(project, kubeconfig).
func setupWith(t *testing.T, cfg config.Config, set func(project string, kubeconfig []byte) string) *env {
	t.Helper()
	project, kc := startFakeGardener(t)
	p := provisionertest.New(t, provisionertest.Options{
		Backends: infrastructure.Config{SetJSON: set(project, kc)},
		Clusters: runtimeclient.Clusters{},
		Config:   &cfg,
	})
	return &env{t: t, client: p.Provisioner.Service, dyn: kubetest.Dynamic(t), core: kubetest.Clientset(t), project: project}
}

// startFakeGardener runs the fake Gardener on a new project until the test ends; it returns the
// project and the kubeconfig of the API server (Gardener's and every runtime's).
func startFakeGardener(t *testing.T) (string, []byte) {
	t.Helper()
	core, dyn := kubetest.Clientset(t), kubetest.Dynamic(t)
	kc := kubetest.Kubeconfig(t)
	project := fmt.Sprintf("e2e%d", time.Now().UnixNano()%1_000_000)
	ns := "garden-" + project
	_, err := core.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = core.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	ctx, cancel := context.WithCancel(context.Background())
	g := &fakeGardener{t: t, core: core, dyn: dyn, namespace: ns, kubeconfig: kc}
	done := make(chan struct{})
	go func() { defer close(done); g.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return project, kc
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
	assert.Equal(t, string(kubetest.Kubeconfig(t)), *status.RuntimeConfiguration.Kubeconfig)

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
	assert.Contains(t, failed.LastError.ErrMessage, quotaError)
}

func sleep() { time.Sleep(50 * time.Millisecond) }
