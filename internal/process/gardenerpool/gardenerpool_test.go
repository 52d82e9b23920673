// Package gardenerpool tests the steps that use the hyperscaler account pool, Resolve_Target_Secret
// and Release_Subscription, on the Gardener pool of a real kube-apiserver (its own package: the
// other step tests need no API server).
package gardenerpool

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/deprovisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

const (
	poll      = 7 * time.Second
	retryTime = 10 * time.Minute
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// world is a Gardener project with the pool's bindings, and the broker's store.
type world struct {
	t     *testing.T
	dyn   dynamic.Interface
	ns    string
	pool  *hyperscaler.Gardener
	store storage.Store
	sys   systems.Systems
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, dyn: kubetest.Dynamic(t), ns: kubetest.Namespace(t)}
	pool, err := hyperscaler.NewGardener(w.dyn, w.ns, hyperscaler.SecretBinding, nil)
	require.NoError(t, err)
	w.pool = pool
	w.store = steptest.OpenStore(t, steptest.IDs{Instance: "inst-1", GlobalAccount: "ga-1", SubAccount: "sa-1"})
	w.sys = systems.Systems{AccountPool: pool, AccountRules: hyperscaler.DefaultRules(), RetryTime: retryTime, CleanupRetryTime: 5 * time.Minute}
	return w
}

func (w *world) binding(name string, labels map[string]string) {
	w.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "SecretBinding",
		"metadata":  map[string]any{"name": name, "namespace": w.ns},
		"secretRef": map[string]any{"name": name, "namespace": w.ns},
		"provider":  map[string]any{"type": labels[hyperscaler.LabelHyperscalerType]},
	}}
	u.SetLabels(labels)
	_, err := w.dyn.Resource(hyperscaler.SecretBindingGVR).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(w.t, err)
}

func (w *world) labels(name string) map[string]string {
	w.t.Helper()
	b, err := w.dyn.Resource(hyperscaler.SecretBindingGVR).Namespace(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(w.t, err)
	return b.GetLabels()
}

func (w *world) shoot(name, binding string) {
	w.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": name, "namespace": w.ns},
		"spec":     map[string]any{"secretBindingName": binding},
	}}
	_, err := w.dyn.Resource(hyperscaler.ShootGVR).Namespace(w.ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(w.t, err)
}

func (w *world) deleteShoot(name string) {
	w.t.Helper()
	require.NoError(w.t, w.dyn.Resource(hyperscaler.ShootGVR).Namespace(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}

func (w *world) resolve() provisioning.ResolveTargetSecret {
	return provisioning.ResolveTargetSecret{Deps: provisioning.Deps{Instances: w.store.Instances(), PollInterval: poll, Systems: w.sys}}
}

func provOp(instanceID, ga, plan, provider, platformRegion string) provisioning.Op {
	return provisioning.Op{
		Operation: storage.Operation{ID: "op-" + instanceID, InstanceID: instanceID, Type: instance.TypeProvision, State: storage.StateInProgress, CreatedAt: t0},
		Data: instance.ProvisioningData{PlanName: plan, Provider: provider, PlatformRegion: platformRegion,
			Parameters: instance.Parameters{Name: "c", Region: "eu-central-1"}, Context: instance.Context{GlobalAccountID: ga, SubAccountID: "sa-" + instanceID}},
	}
}

func run(t *testing.T, s engine.Step[instance.ProvisioningData], op provisioning.Op, now time.Time) (provisioning.Op, time.Duration, error) {
	t.Helper()
	return steptest.RunWithin(30*time.Second, s, op, now)
}

func TestResolveTargetSecret_ClaimsTheGlobalAccountsOwnBinding(t *testing.T) {
	w := newWorld(t)
	w.binding("aws-1", map[string]string{hyperscaler.LabelHyperscalerType: "aws"})
	w.binding("aws-2", map[string]string{hyperscaler.LabelHyperscalerType: "aws"})
	w.binding("aws-eu", map[string]string{hyperscaler.LabelHyperscalerType: "aws", hyperscaler.LabelEUAccess: "true"})
	w.binding("aws-shared", map[string]string{hyperscaler.LabelHyperscalerType: "aws", hyperscaler.LabelShared: "true"})

	first, wait, err := run(t, w.resolve(), provOp("inst-1", "ga-1", "aws", "aws", "cf-eu10"), t0)
	require.NoError(t, err)
	require.Zero(t, wait)
	require.Contains(t, []string{"aws-1", "aws-2"}, first.Data.TargetSecret)
	assert.Equal(t, "ga-1", w.labels(first.Data.TargetSecret)[hyperscaler.LabelTenantName])

	second, _, err := run(t, w.resolve(), provOp("inst-2", "ga-1", "aws", "aws", "cf-eu10"), t0)
	require.NoError(t, err)
	assert.Equal(t, first.Data.TargetSecret, second.Data.TargetSecret, "every runtime of a global account on one account")

	other, _, err := run(t, w.resolve(), provOp("inst-3", "ga-2", "aws", "aws", "cf-eu10"), t0)
	require.NoError(t, err)
	assert.NotEqual(t, first.Data.TargetSecret, other.Data.TargetSecret)

	eu, _, err := run(t, w.resolve(), provOp("inst-4", "ga-3", "aws", "aws", "cf-eu11"), t0)
	require.NoError(t, err)
	assert.Equal(t, "aws-eu", eu.Data.TargetSecret, "cf-eu11 uses the EU access pool")

	trial, _, err := run(t, w.resolve(), provOp("inst-5", "ga-4", "trial", "aws", "cf-eu10"), t0)
	require.NoError(t, err)
	assert.Equal(t, "aws-shared", trial.Data.TargetSecret, "trial runs on a shared account")
	assert.NotContains(t, w.labels("aws-shared"), hyperscaler.LabelTenantName)
}

// No free binding is retried like a failing system, durably (the step asks to run again), until
// the retry window ends: then the operation fails naming the pool.
func TestResolveTargetSecret_NoFreeBindingIsRetriedThenFails(t *testing.T) {
	w := newWorld(t)
	w.binding("gcp-1", map[string]string{hyperscaler.LabelHyperscalerType: "gcp", hyperscaler.LabelTenantName: "ga-other"})

	op := provOp("inst-1", "ga-1", "gcp", "gcp", "cf-eu10")
	out, wait, err := run(t, w.resolve(), op, t0)
	require.NoError(t, err, "not a failure yet")
	assert.Equal(t, poll, wait)
	assert.Empty(t, out.Data.TargetSecret)
	assert.Contains(t, out.LastError, "hyperscaler account pool")
	assert.Contains(t, out.LastError, hyperscaler.ErrNoFreeBinding.Error())
	assert.Contains(t, out.LastError, "hyperscalerType=gcp")

	w.binding("gcp-2", map[string]string{hyperscaler.LabelHyperscalerType: "gcp"})
	out, wait, err = run(t, w.resolve(), out, t0.Add(poll))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "gcp-2", out.Data.TargetSecret, "an account added meanwhile is claimed on the retry")
	assert.Empty(t, out.LastError)

	late := provOp("inst-2", "ga-2", "gcp", "gcp", "cf-eu10")
	late = steptest.Attempted(late, "Resolve_Target_Secret", t0, 80)
	_, _, err = run(t, w.resolve(), late, t0.Add(retryTime+time.Minute))
	require.Error(t, err, "after the retry window the operation fails")
	assert.Contains(t, err.Error(), "hyperscaler account pool")
	assert.Contains(t, err.Error(), hyperscaler.ErrNoFreeBinding.Error())
}

// Release_Subscription marks the global account's binding dirty once its last runtime is gone,
// and the binding is never handed out again.
func TestReleaseSubscription_MarksDirtyOnTheLastRuntimeGone(t *testing.T) {
	w := newWorld(t)
	w.binding("azure-1", map[string]string{hyperscaler.LabelHyperscalerType: "azure"})
	w.binding("azure-2", map[string]string{hyperscaler.LabelHyperscalerType: "azure"})
	ctx := context.Background()

	// Two instances of ga-1 resolved the same account; inst-2 is still provisioning (no Shoot).
	steptest.SeedInstance(t, w.store, steptest.IDs{Instance: "inst-2", GlobalAccount: "ga-1", SubAccount: "sa-2"})
	for _, id := range []string{"inst-1", "inst-2"} {
		out, _, err := run(t, w.resolve(), provOp(id, "ga-1", "azure", "azure", "cf-eu10"), t0)
		require.NoError(t, err)
		require.Equal(t, "azure-1", out.Data.TargetSecret)
		saveProvisioning(t, w.store, id, out.Data)
	}

	release := deprovisioning.ReleaseSubscription{Deps: deprovisioning.Deps{Instances: w.store.Instances(), Operations: w.store.Operations(), PollInterval: poll, Systems: w.sys}}
	deprov := func(id string) deprovisioning.Op {
		return deprovisioning.Op{Operation: storage.Operation{ID: "deprov-" + id, InstanceID: id, Type: instance.TypeDeprovision, State: storage.StateInProgress, CreatedAt: t0},
			Data: instance.DeprovisioningData{GlobalAccountID: "ga-1"}}
	}
	archive := func(id string) {
		_, err := storage.ModifyInstance(ctx, w.store.Instances(), id, func(i *storage.Instance) { now := t0; i.DeletedAt = &now })
		require.NoError(t, err)
	}

	// inst-1 is deprovisioned: inst-2 still uses the account.
	archive("inst-1")
	out, wait, err := steptest.RunWithin(30*time.Second, engine.Step[instance.DeprovisioningData](release), deprov("inst-1"), t0)
	require.NoError(t, err)
	require.Zero(t, wait)
	assert.Empty(t, out.Progress.ExecutedButNotCompleted)
	assert.NotContains(t, w.labels("azure-1"), hyperscaler.LabelDirty, "another live instance resolved it, its Shoot still to come")

	// inst-2 got its Shoot and is deprovisioned; while the Shoot exists the account is kept.
	w.shoot("c-2", "azure-1")
	archive("inst-2")
	_, _, err = steptest.RunWithin(30*time.Second, engine.Step[instance.DeprovisioningData](release), deprov("inst-2"), t0)
	require.NoError(t, err)
	assert.NotContains(t, w.labels("azure-1"), hyperscaler.LabelDirty, "a Shoot still names it")

	// Its Shoot is gone (as once Remove_Runtime finished): released on the step's rerun.
	w.deleteShoot("c-2")
	_, _, err = steptest.RunWithin(30*time.Second, engine.Step[instance.DeprovisioningData](release), deprov("inst-2"), t0)
	require.NoError(t, err)
	l := w.labels("azure-1")
	assert.Equal(t, "true", l[hyperscaler.LabelDirty], "the last runtime is gone")
	assert.Equal(t, "ga-1", l[hyperscaler.LabelTenantName])

	next, _, err := run(t, w.resolve(), provOp("inst-3", "ga-9", "azure", "azure", "cf-eu10"), t0)
	require.NoError(t, err)
	assert.Equal(t, "azure-2", next.Data.TargetSecret, "the dirty account is never handed to another tenant")
	_, wait, err = run(t, w.resolve(), provOp("inst-4", "ga-1", "azure", "azure", "cf-eu10"), t0)
	require.NoError(t, err)
	assert.Equal(t, poll, wait, "nor to its old tenant: the pool has none free now")
}

func TestDeprovisioningRunsReleaseAfterRemoveRuntimeOnGardenerOnly(t *testing.T) {
	w := newWorld(t)
	p, err := deprovisioning.Process(deprovisioning.Deps{Systems: w.sys}, time.Hour, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"Release_Subscription"}, p.Stages()["weight_11"])
	assert.Equal(t, []string{"Remove_Runtime"}, p.Stages()["weight_10"])

	list, err := hyperscaler.ParsePool("azure:a")
	require.NoError(t, err)
	p, err = deprovisioning.Process(deprovisioning.Deps{Systems: systems.Systems{AccountPool: list}}, time.Hour, time.Minute)
	require.NoError(t, err)
	assert.NotContains(t, p.Stages(), "weight_11", "the list assigns nothing to give back")
}

// saveProvisioning stores a finished provisioning of the instance with data.
func saveProvisioning(t *testing.T, store storage.Store, instanceID string, data instance.ProvisioningData) {
	t.Helper()
	raw, err := engine.NewOperation(instance.TypeProvision, instanceID, data, time.Hour, t0.Add(-time.Hour))
	require.NoError(t, err)
	op, err := store.Operations().InsertOperation(context.Background(), raw)
	require.NoError(t, err)
	op.State, op.DueAt = storage.StateSucceeded, nil
	_, err = store.Operations().UpdateOperation(context.Background(), op)
	require.NoError(t, err)
}
