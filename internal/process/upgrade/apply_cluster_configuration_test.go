package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const applyStep = "Apply_Cluster_Configuration"

func runApply(ctx context.Context, e *env, op KymaOp, now time.Time) (KymaOp, time.Duration, error) {
	return steptest.Run(ctx, ApplyClusterConfiguration{e.deps}, op, now)
}

func reconcilerObjects(t *testing.T, e *env) reconcilerstandin.Objects {
	return objects[reconcilerstandin.Objects](t, e, "reconciler")
}

// withKubeconfig is an initialised upgrade to version after Get_Kubeconfig ran.
func (e *env) withKubeconfig(t *testing.T, version string) KymaOp {
	op := e.initialized(t, version)
	op.Secrets[provisioning.KubeconfigSecret] = testKubeconfig
	return op
}

func TestApplyClusterConfiguration_Name(t *testing.T) {
	assert.Equal(t, applyStep, ApplyClusterConfiguration{}.Name())
}

func TestApplyClusterConfiguration_AppliesAndWaitsUntilReady(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{ReconcileTime: time.Minute})
	op := e.withKubeconfig(t, "2.21.0")

	out, wait, err := runApply(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, wait, "applied: check at once")
	assert.Equal(t, int64(1), out.Data.ReconcilerConfigurationVersion)
	assert.Equal(t, testRuntimeID, out.Data.Resources.ReconcilerClusterID)

	objs := reconcilerObjects(t, e)
	require.Len(t, objs.Clusters, 1)
	c := objs.Clusters[0]
	assert.Equal(t, testRuntimeID, c.RuntimeID)
	assert.Equal(t, "2.21.0", c.KymaVersion)
	assert.Equal(t, "production", c.Profile)
	assert.Equal(t, []string{"admin@example.com"}, c.Administrators)
	assert.Equal(t, reconcilerstandin.RuntimeInput{Name: "c1", Description: "Kyma runtime of instance " + testInstanceID}, c.RuntimeInput)
	assert.Equal(t, reconcilerstandin.Metadata{
		GlobalAccountID: testGA, SubAccountID: testSA, ServiceID: "svc", ServicePlanID: "plan-azure", ServicePlanName: "azure",
		ShootName: "c-1234567", InstanceID: testInstanceID, Region: "westeurope",
	}, c.Metadata)
	sum := sha256.Sum256([]byte(testKubeconfig))
	assert.Equal(t, reconcilerstandin.KubeconfigInfo{Length: len(testKubeconfig), SHA256: hex.EncodeToString(sum[:8])}, c.Kubeconfig)
	var names []string
	for _, comp := range c.Components {
		names = append(names, comp.Component)
	}
	assert.Equal(t, []string{"istio", "serverless", "monitoring"}, names, "the default components, then those the overrides name")
	assert.Equal(t, []reconcilerstandin.Configuration{
		{Key: "global.domainName", Value: "c-1234567.kyma.local"},
		{Key: "grafana.clientID", Value: "grafana-id"},
		{Key: "grafana.clientSecret", Value: reconcilerstandin.Masked, Secret: true},
	}, c.Components[2].Configuration, "global entries go to every component; the secret is marked secret")
	assert.NotContains(t, dataJSON(t, out.Data), grafanaSecret)

	out, wait, err = runApply(context.Background(), e, out, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "Reconciler: cluster is "+reconciler.StatusReconcilePending, out.LastError)

	e.clock.Advance(2 * time.Minute)
	out, wait, err = runApply(context.Background(), e, out, e.clock.Now())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, 1, reconcilerObjects(t, e).Clusters[0].ConfigurationVersionsCreated)
}

// A runtime the reconciler installed gets a new configuration version of its cluster.
func TestApplyClusterConfiguration_UpgradesAnInstalledCluster(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	installed := e.withKubeconfig(t, "2.20.0")
	installed, _, err := runApply(context.Background(), e, installed, t0)
	require.NoError(t, err)

	op := e.withKubeconfig(t, "2.21.0")
	out, _, err := runApply(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, installed.Data.ReconcilerConfigurationVersion+1, out.Data.ReconcilerConfigurationVersion)
	out, wait, err := runApply(context.Background(), e, out, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)

	c := reconcilerObjects(t, e).Clusters[0]
	assert.Equal(t, "2.21.0", c.KymaVersion)
	assert.Equal(t, 1, c.Creations)
	assert.Equal(t, 2, c.ConfigurationVersionsCreated)
}

func TestApplyClusterConfiguration_Idempotent(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.withKubeconfig(t, "2.21.0")
	first, _, err := runApply(context.Background(), e, op, t0)
	require.NoError(t, err)

	// The first run's result lost: applying the same configuration again creates nothing.
	lost, wait, err := runApply(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, wait)
	assert.Equal(t, first.Data.ReconcilerConfigurationVersion, lost.Data.ReconcilerConfigurationVersion)

	c := reconcilerObjects(t, e).Clusters[0]
	assert.Equal(t, 1, c.ConfigurationVersionsCreated)
	assert.Equal(t, 1, c.Creations)
	assert.Equal(t, 2, c.Calls["apply"])
}

func TestApplyClusterConfiguration_ReconcilerDownRetries(t *testing.T) {
	t.Run("apply", func(t *testing.T) {
		e := newSandboxEnv(t, standins.Options{})
		op := e.withKubeconfig(t, "2.21.0")
		e.sb.Down(t, "reconciler")

		out, wait, err := runApply(downCtx(t), e, op, t0)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "Reconciler: applying the cluster configuration")
		assert.Zero(t, out.Data.ReconcilerConfigurationVersion)
		assert.Empty(t, reconcilerObjects(t, e).Clusters)
	})
	t.Run("status", func(t *testing.T) {
		e := newSandboxEnv(t, standins.Options{})
		op, _, err := runApply(context.Background(), e, e.withKubeconfig(t, "2.21.0"), t0)
		require.NoError(t, err)
		e.sb.Down(t, "reconciler")

		out, wait, err := runApply(downCtx(t), e, op, t0)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "Reconciler: reading the cluster's status")
	})
}

func TestApplyClusterConfiguration_GivesUpAfterRetryTime(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := tryingSince(e.withKubeconfig(t, "2.21.0"), applyStep, t0)
	e.sb.Down(t, "reconciler")

	_, wait, err := runApply(downCtx(t), e, op, t0.Add(testRetryTime-time.Second))
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)

	_, wait, err = runApply(downCtx(t), e, op, t0.Add(testRetryTime+time.Second))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "Reconciler: applying the cluster configuration")
	assert.Contains(t, err.Error(), "step Apply_Cluster_Configuration gave up after 1m0s")
}

func TestApplyClusterConfiguration_RejectedFailsAtOnce(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.initialized(t, "2.21.0") // no kubeconfig: the reconciler answers 400

	_, wait, err := runApply(context.Background(), e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "Reconciler: applying the cluster configuration")
	assert.Contains(t, err.Error(), "kubeconfig is required")
	assert.Contains(t, err.Error(), "step Apply_Cluster_Configuration failed")
	objs := reconcilerObjects(t, e)
	assert.Empty(t, objs.Clusters)
	assert.Equal(t, 1, objs.Calls["apply.invalid"], "not retried")
}

func TestApplyClusterConfiguration_InstallationErrorFails(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{FailingComponents: []string{"serverless"}})
	op, _, err := runApply(context.Background(), e, e.withKubeconfig(t, "2.21.0"), t0)
	require.NoError(t, err)

	_, wait, err := runApply(context.Background(), e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "Reconciler: installing Kyma failed (configuration version 1) (step Apply_Cluster_Configuration)", err.Error())
}

func TestApplyClusterConfiguration_UnknownClusterFails(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.withKubeconfig(t, "2.21.0")
	op.Data.ReconcilerConfigurationVersion = 3 // applied, but the reconciler does not know the cluster

	_, wait, err := runApply(context.Background(), e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "Reconciler: reading the cluster's status")
	assert.Contains(t, err.Error(), "step Apply_Cluster_Configuration failed")
}

func TestApplyClusterConfiguration_MissingSecretValueFails(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.withKubeconfig(t, "2.21.0")
	op.Secrets = storage.Secrets{provisioning.KubeconfigSecret: testKubeconfig}

	_, wait, err := runApply(context.Background(), e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "grafana.clientSecret")
	assert.Empty(t, reconcilerObjects(t, e).Calls, "nothing is sent without the secret")
}
