package provisioning_test

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const reconcileTime = 10 * time.Minute

func checkClusterStep(e *env) step { return provisioning.CheckClusterConfiguration{Deps: e.deps} }

// applied is an operation whose cluster configuration the reconciler accepted at the env's now.
func applied(t *testing.T, e *env) Op {
	t.Helper()
	return e.mustRun(t, applyStep(e), withKubeconfig(), e.clock.Now())
}

func TestCheckClusterConfiguration_Name(t *testing.T) {
	assert.Equal(t, "Check_Cluster_Configuration", provisioning.CheckClusterConfiguration{}.Name())
}

func TestCheckClusterConfiguration_WaitsUntilReady(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{ReconcileTime: reconcileTime})
	op := applied(t, e)

	out, wait, err := e.run(checkClusterStep(e), op, e.clock.Now())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "Reconciler: cluster is reconcile_pending", out.LastError)

	e.clock.Advance(reconcileTime)
	out, wait, err = e.run(checkClusterStep(e), out, e.clock.Now())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "Reconciler: cluster is reconciling", out.LastError)

	e.clock.Advance(reconcileTime)
	out = e.mustRun(t, checkClusterStep(e), out, e.clock.Now())
	assert.Empty(t, out.LastError)

	// Reading the status changes nothing in the reconciler.
	c := cluster(t, e)
	assert.Equal(t, reconcilerstandin.StatusReady, c.Status)
	assert.Equal(t, 1, c.ConfigurationVersionsCreated)
	assert.Equal(t, 3, c.Calls["status"])
	assert.Equal(t, 1, c.Calls["apply"])
}

// A reconciliation the reconciler retries itself (reconcile_error_retryable) is waited for and
// rechecked, not failed.
func TestCheckClusterConfiguration_RetryableErrorWaits(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{ReconcileTime: reconcileTime, RetryableComponents: []string{"serverless"}})
	op := applied(t, e)
	e.clock.Advance(2 * reconcileTime)
	out, wait, err := e.run(checkClusterStep(e), op, e.clock.Now())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "Reconciler: cluster is reconcile_error_retryable", out.LastError)

	e.clock.Advance(2 * reconcileTime)
	out = e.mustRun(t, checkClusterStep(e), out, e.clock.Now())
	assert.Empty(t, out.LastError)
	assert.Equal(t, reconcilerstandin.StatusReady, cluster(t, e).Status)
	assert.Equal(t, 1, cluster(t, e).Calls["apply"], "the step does not apply again")
}

// A ready status of an older configuration than the one applied is not this configuration's.
func TestCheckClusterConfiguration_OlderConfigurationWaits(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := applied(t, e)
	op.Data.ReconcilerConfigurationVersion = 2
	_, wait, err := e.run(checkClusterStep(e), op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
}

func TestCheckClusterConfiguration_FailedInstallationFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{ReconcileTime: reconcileTime, FailingComponents: []string{"serverless"}})
	op := applied(t, e)
	e.clock.Advance(2 * reconcileTime)
	_, wait, err := e.run(checkClusterStep(e), op, e.clock.Now())
	assertFailed(t, wait, err, "Reconciler", "Check_Cluster_Configuration")
	assert.Contains(t, err.Error(), "installing Kyma failed (configuration version 1)")
}

func TestCheckClusterConfiguration_UnknownClusterFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := withKubeconfig()
	op.Data.ReconcilerConfigurationVersion = 1
	_, wait, err := e.run(checkClusterStep(e), op, t0)
	assertFailed(t, wait, err, "Reconciler", "Check_Cluster_Configuration")
	assert.Contains(t, err.Error(), "not found")
}

func TestCheckClusterConfiguration_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := applied(t, e)
	out := e.downThenGiveUp(t, checkClusterStep(e), op, "reconciler", "Reconciler")
	assert.Contains(t, out.LastError, "reading the cluster's status")
}

func TestReconcileOutcome(t *testing.T) {
	for _, tc := range []struct {
		status  string
		version int64
		wait    bool
		err     string
	}{
		{status: reconciler.StatusReady, version: 2, wait: false},
		{status: reconciler.StatusReady, version: 3, wait: false},
		{status: reconciler.StatusReady, version: 1, wait: true},
		{status: reconciler.StatusReconcilePending, version: 2, wait: true},
		{status: reconciler.StatusReconciling, version: 2, wait: true},
		{status: reconciler.StatusReconcileErrorRetryable, version: 2, wait: true},
		{status: reconciler.StatusError, version: 2, err: "installing Kyma failed (configuration version 2)"},
		{status: reconciler.StatusDeleting, version: 2, err: `unexpected cluster status "deleting"`},
	} {
		wait, err := systems.ReconcileOutcome(&reconciler.State{Status: tc.status, ConfigurationVersion: tc.version}, 2)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.status)
			continue
		}
		assert.NoError(t, err, tc.status)
		assert.Equal(t, tc.wait, wait, "%s v%d", tc.status, tc.version)
	}
}
