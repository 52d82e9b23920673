package upgrade

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const upgradeClusterStep = "Upgrade_Cluster"

func runUpgradeCluster(e *env, op ClusterOp, now time.Time) (ClusterOp, time.Duration, error) {
	return steptest.Run(context.Background(), UpgradeCluster{e.deps}, op, now)
}

// clusterInitialized is a cluster upgrade after its initialisation.
func clusterInitialized(data instance.UpgradeClusterData) ClusterOp {
	data.GlobalAccountID, data.RuntimeID = testGA, testRuntimeID
	return clusterOp(data)
}

func TestUpgradeCluster_Name(t *testing.T) {
	assert.Equal(t, upgradeClusterStep, UpgradeCluster{}.Name())
}

func TestUpgradeCluster_RequestsTheUpgradeAndWaits(t *testing.T) {
	e := newEnv(t)
	e.prov.shoot = accepting[gqlschema.UpgradeShootInput]("pop-uc")
	e.prov.status = statuses("pop-uc", gqlschema.OperationStateInProgress, gqlschema.OperationStateSucceeded)
	op := clusterInitialized(instance.UpgradeClusterData{KubernetesVersion: "1.32.1", MachineImageVersion: "1592.4.0"})

	out, wait, err := runUpgradeCluster(e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, wait)
	assert.Equal(t, "pop-uc", out.Data.ProvisionerOperationID)
	calls := e.prov.CallsTo("UpgradeShoot")
	require.Len(t, calls, 1)
	assert.Equal(t, testGA, calls[0].Tenant)
	assert.Equal(t, testRuntimeID, calls[0].ID)
	assert.Equal(t, gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{
		KubernetesVersion: strp("1.32.1"), MachineImageVersion: strp("1592.4.0"),
	}}, *calls[0].Shoot)

	out, wait, err = runUpgradeCluster(e, out, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait, "in progress")
	out, wait, err = runUpgradeCluster(e, out, t0.Add(testPoll))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, []string{"UpgradeShoot", "RuntimeOperationStatus", "RuntimeOperationStatus"}, e.prov.methods())
}

func TestUpgradeCluster_OnlyTheGivenVersions(t *testing.T) {
	e := newEnv(t)
	e.prov.shoot = accepting[gqlschema.UpgradeShootInput]("pop-uc")
	_, _, err := runUpgradeCluster(e, clusterInitialized(instance.UpgradeClusterData{MachineImageVersion: "1592.4.0"}), t0)
	require.NoError(t, err)
	in := e.prov.CallsTo("UpgradeShoot")[0].Shoot.GardenerConfig
	assert.Nil(t, in.KubernetesVersion, "an empty version is not sent")
	assert.Equal(t, strp("1592.4.0"), in.MachineImageVersion)
}

func TestUpgradeCluster_RequestsOnce(t *testing.T) {
	e := newEnv(t)
	e.prov.shoot = accepting[gqlschema.UpgradeShootInput]("pop-other")
	e.prov.status = statuses("pop-uc", gqlschema.OperationStateSucceeded)
	op := clusterInitialized(instance.UpgradeClusterData{KubernetesVersion: "1.32.1", ProvisionerOperationID: "pop-uc"})

	out, wait, err := runUpgradeCluster(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "pop-uc", out.Data.ProvisionerOperationID)
	assert.Equal(t, []string{"RuntimeOperationStatus"}, e.prov.methods(), "no second upgrade request")
}

func TestUpgradeCluster_TemporaryErrorRetriesThenGivesUp(t *testing.T) {
	e := newEnv(t)
	e.prov.shoot = func(string, string, gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
		return nil, apperr.Conflict("another operation is in progress")
	}
	op := clusterInitialized(instance.UpgradeClusterData{KubernetesVersion: "1.32.1"})

	out, wait, err := runUpgradeCluster(e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "calling the provisioner: ")
	assert.Contains(t, out.LastError, "another operation is in progress")
	assert.Empty(t, out.Data.ProvisionerOperationID)

	op = tryingSince(op, upgradeClusterStep, t0)
	_, wait, err = runUpgradeCluster(e, op, t0.Add(testRetryTime-time.Second))
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	_, wait, err = runUpgradeCluster(e, op, t0.Add(testRetryTime+time.Second))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "another operation is in progress")
	assert.Contains(t, err.Error(), "step Upgrade_Cluster gave up after 1m0s")
}

func TestUpgradeCluster_RejectedFailsAtOnce(t *testing.T) {
	for name, provErr := range map[string]error{
		"bad request": apperr.BadRequest("gardenerConfig.kubernetesVersion", "downgrade to %q", "1.20"),
		"not found":   apperr.NotFound("runtime %s not found", testRuntimeID),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.shoot = func(string, string, gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
				return nil, provErr
			}

			out, wait, err := runUpgradeCluster(e, clusterInitialized(instance.UpgradeClusterData{KubernetesVersion: "1.20"}), t0)
			require.Error(t, err)
			assert.Zero(t, wait)
			assert.Contains(t, err.Error(), "the provisioner rejected the cluster upgrade")
			assert.Equal(t, apperr.CodeOf(provErr), apperr.CodeOf(err))
			assert.Empty(t, out.Data.ProvisionerOperationID)
			assert.Len(t, e.prov.Calls(), 1)
		})
	}
}

func TestUpgradeCluster_FailedUpgradeFails(t *testing.T) {
	e := newEnv(t)
	st := opStatus("pop-uc", gqlschema.OperationStateFailed)
	st.Message = strp("shoot reconciliation failed")
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return st, nil }

	_, wait, err := runUpgradeCluster(e, clusterInitialized(instance.UpgradeClusterData{ProvisionerOperationID: "pop-uc"}), t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "provisioner operation pop-uc failed: shoot reconciliation failed", err.Error())
}

func TestUpgradeCluster_StatusErrorKeepsPolling(t *testing.T) {
	e := newEnv(t)
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return nil, errors.New("connection reset") }

	out, wait, err := runUpgradeCluster(e, clusterInitialized(instance.UpgradeClusterData{ProvisionerOperationID: "pop-uc"}), t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "reading the provisioner's operation: connection reset", out.LastError)
}
