package upgrade

import (
	"context"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const clusterInitStep = "Upgrade_Cluster_Initialisation"

func TestClusterInitialisation_Name(t *testing.T) {
	assert.Equal(t, clusterInitStep, ClusterInitialisation{}.Name())
}

func TestClusterInitialisation_ReadsTheRuntime(t *testing.T) {
	e := newEnv(t)
	op := clusterOp(instance.UpgradeClusterData{KubernetesVersion: "1.32.1"})

	out, wait, err := steptest.Run(context.Background(), ClusterInitialisation{e.deps}, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, instance.UpgradeClusterData{KubernetesVersion: "1.32.1", GlobalAccountID: testGA, RuntimeID: testRuntimeID}, out.Data)
	assert.Equal(t, "upgrading the cluster", out.Description)

	again, wait, err := steptest.Run(context.Background(), ClusterInitialisation{e.deps}, out, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, out.Data, again.Data, "running again reads the same")
}

func TestClusterInitialisation_NoRuntimeFails(t *testing.T) {
	e := newEnv(t)
	insertInstance(t, e.store, "inst-2", "")
	op := clusterOp(instance.UpgradeClusterData{KubernetesVersion: "1.32.1"})
	op.InstanceID = "inst-2"

	out, wait, err := steptest.Run(context.Background(), ClusterInitialisation{e.deps}, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "instance inst-2 has no runtime to upgrade", err.Error())
	assert.Empty(t, out.Data.RuntimeID)
}

func TestClusterInitialisation_RetriesReadingTheInstance(t *testing.T) {
	e := newEnv(t)
	op := clusterOp(instance.UpgradeClusterData{KubernetesVersion: "1.32.1"})
	op.InstanceID = "inst-missing"

	out, wait, err := steptest.Run(context.Background(), ClusterInitialisation{e.deps}, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "reading the instance")
	assert.Empty(t, out.Data.RuntimeID)
}
