package deprovisioning

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const deregisterStep = "Deregister_Cluster"

var clusterCleanup = cleanupStep{
	step:    func(d Deps) engine.Step[instance.DeprovisioningData] { return DeregisterCluster{d} },
	sandbox: "reconciler", system: "Reconciler",
	create: func(t *testing.T, e *env) instance.Resources { return registerCluster(t, e, "rt-1") },
	cleared: func(r instance.Resources) instance.Resources {
		r.ReconcilerClusterID = ""
		return r
	},
	remaining: func(t *testing.T, e *env) int {
		return len(clusters(t, e, func(s string) bool { return s != reconciler.StatusDeleted }))
	},
	deletions: func(t *testing.T, e *env) int {
		return len(clusters(t, e, func(s string) bool { return s == reconciler.StatusDeleted }))
	},
	// The reconciler takes no credentials.
}

// registerCluster hands a runtime's cluster to the sandbox's reconciler, as provisioning does.
func registerCluster(t *testing.T, e *env, runtimeID string) instance.Resources {
	t.Helper()
	_, err := e.sys.Systems.Reconciler.ApplyClusterConfig(testCtx(t), reconciler.Cluster{
		RuntimeID:    runtimeID,
		RuntimeInput: reconciler.RuntimeInput{Name: "c1"},
		KymaConfig: reconciler.KymaConfig{Version: "2.0.0", Profile: "production", Components: []reconciler.Component{
			{Component: "istio", Namespace: "istio-system", Version: "2.0.0"}, {Component: "eventing", Namespace: "kyma-system", Version: "2.0.0"},
		}},
		Metadata:   reconciler.Metadata{GlobalAccountID: testGA, SubAccountID: testSA, InstanceID: testInstanceID},
		Kubeconfig: "apiVersion: v1\nkind: Config\n",
	})
	require.NoError(t, err)
	return instance.Resources{ReconcilerClusterID: runtimeID}
}

// clusters are the reconciler's clusters whose status matches, by runtime ID.
func clusters(t *testing.T, e *env, status func(string) bool) map[string]reconcilerstandin.Object {
	t.Helper()
	out := map[string]reconcilerstandin.Object{}
	for _, c := range objects[reconcilerstandin.Objects](t, e, "reconciler").Clusters {
		if status(c.Status) {
			out[c.RuntimeID] = c
		}
	}
	return out
}

func TestDeregisterCluster_Name(t *testing.T) {
	assert.Equal(t, deregisterStep, DeregisterCluster{}.Name())
}

func TestDeregisterCluster(t *testing.T) { testCleanupStep(t, clusterCleanup) }

// The reconciler removes Kyma from the cluster in the background: the step asks once, then polls
// the status until the cluster is deleted.
func TestDeregisterCluster_WaitsForTheReconciler(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{ReconcileDeleteTime: time.Minute})
	res := registerCluster(t, e, "rt-1")
	registerCluster(t, e, "rt-other")
	step := DeregisterCluster{e.deps}

	out, wait, err := runStep(e, step, withResources(res), t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait, "deletion requested, now poll")
	assert.Equal(t, "rt-1", out.Data.Resources.ReconcilerClusterID)

	for _, status := range []string{reconciler.StatusDeletePending, reconciler.StatusDeleting} {
		require.Contains(t, clusters(t, e, func(s string) bool { return s == status }), "rt-1")
		out, wait, err = runStep(e, step, out, e.clock.Now())
		assertRetrying(t, out, wait, err, "Reconciler")
		assert.Equal(t, "Reconciler: deleting the cluster: still being deleted", out.LastError, status)
		e.clock.Advance(time.Minute)
	}

	out, wait, err = runStep(e, step, out, e.clock.Now())
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.ReconcilerClusterID)
	objs := objects[reconcilerstandin.Objects](t, e, "reconciler")
	assert.Equal(t, 1, objs.Calls["delete"], "deletion asked once")
	assert.Contains(t, clusters(t, e, func(s string) bool { return s == reconciler.StatusReady }), "rt-other", "another runtime's cluster stays")
}

// A deletion the reconciler retries itself (delete_error_retryable) is waited for and rechecked;
// the step does not ask again.
func TestDeregisterCluster_RetryableDeletionErrorWaits(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{ReconcileDeleteTime: time.Minute, RetryableComponents: []string{"eventing"}})
	res := registerCluster(t, e, "rt-1")
	step := DeregisterCluster{e.deps}
	out, wait, err := runStep(e, step, withResources(res), t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)

	e.clock.Advance(2 * time.Minute)
	require.Contains(t, clusters(t, e, func(s string) bool { return s == reconciler.StatusDeleteErrorRetryable }), "rt-1")
	out, wait, err = runStep(e, step, out, e.clock.Now())
	assertRetrying(t, out, wait, err, "Reconciler")
	assert.Equal(t, "Reconciler: deleting the cluster: status delete_error_retryable, the reconciler retries", out.LastError)

	e.clock.Advance(2 * time.Minute)
	out, wait, err = runStep(e, step, out, e.clock.Now())
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.ReconcilerClusterID)
	assert.Equal(t, 1, objects[reconcilerstandin.Objects](t, e, "reconciler").Calls["delete"], "deletion asked once")
}

func TestDeregisterCluster_DeletedWhileStillReconciling(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{ReconcileTime: time.Hour})
	res := registerCluster(t, e, "rt-1")
	require.Contains(t, clusters(t, e, func(s string) bool { return s == reconciler.StatusReconcilePending }), "rt-1")

	out := runUntilDone(t, e, DeregisterCluster{e.deps}, withResources(res))
	assert.Empty(t, out.Data.Resources.ReconcilerClusterID)
	assert.Contains(t, clusters(t, e, func(s string) bool { return s == reconciler.StatusDeleted }), "rt-1")
}

func TestDeregisterCluster_UnknownClusterCountsAsGone(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})

	out, wait, err := runStep(e, DeregisterCluster{e.deps}, withResources(instance.Resources{ReconcilerClusterID: "rt-never-registered"}), t0)
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.ReconcilerClusterID)
	objs := objects[reconcilerstandin.Objects](t, e, "reconciler")
	assert.Equal(t, 1, objs.Calls["status"])
	assert.Zero(t, objs.Calls["delete"], "nothing to delete")
}

func TestDeregisterCluster_DeletionOutlastsTheWindow(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{ReconcileDeleteTime: time.Hour})
	res := registerCluster(t, e, "rt-1")
	_, _, err := runStep(e, DeregisterCluster{e.deps}, withResources(res), t0)
	require.NoError(t, err)
	op, past, _ := pastCleanupWindow(e, withResources(res), deregisterStep)

	out, wait, err := runStep(e, DeregisterCluster{e.deps}, op, past)
	assertGaveUp(t, out, wait, err, deregisterStep, "Reconciler")
	assert.Contains(t, out.LastError, "still being deleted")
	assert.Equal(t, res, out.Data.Resources)
}
