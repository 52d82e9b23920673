package upgrade

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runInit(e *env, op KymaOp) (KymaOp, time.Duration, error) {
	return steptest.Run(context.Background(), KymaInitialisation{e.deps}, op, t0)
}

func TestKymaInitialisation_Name(t *testing.T) {
	assert.Equal(t, "Upgrade_Kyma_Initialisation", KymaInitialisation{}.Name())
}

func TestKymaInitialisation_FillsTheUpgradeFromTheProvisioning(t *testing.T) {
	e := newEnv(t)
	provs, err := e.store.Operations().ListOperations(context.Background(), storage.OperationFilter{Types: []string{instance.TypeProvision}})
	require.NoError(t, err)
	require.Len(t, provs.Items, 1)

	out, wait, err := runInit(e, kymaOp("2.21.0"))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, "upgrading Kyma to 2.21.0", out.Description)

	d := out.Data
	assert.True(t, d.Initialized)
	assert.Equal(t, "2.21.0", d.KymaVersion, "the target version stays the operator's")
	assert.Equal(t, testGA, d.GlobalAccountID)
	assert.Equal(t, testSA, d.SubAccountID)
	assert.Equal(t, testRuntimeID, d.RuntimeID)
	assert.Equal(t, "plan-azure", d.PlanID)
	assert.Equal(t, "azure", d.PlanName)
	assert.Equal(t, "svc", d.ServiceID)
	assert.Equal(t, "azure", d.Provider)
	assert.Equal(t, "westeurope", d.Region)
	assert.Equal(t, "c1", d.Name)
	assert.Equal(t, "c-1234567", d.ShootName)
	assert.Equal(t, []string{"admin@example.com"}, d.Administrators)
	assert.Equal(t, provs.Items[0].ID, d.ProvisioningOperationID)
	assert.Equal(t, instance.Resources{AVSInternalEvaluationID: 42}, d.Resources)

	assert.Equal(t, []overrides.Entry{{Key: "grafana.clientID", Value: "grafana-id"}, {Key: "grafana.clientSecret", Secret: true}}, d.Overrides["monitoring"])
	assert.Equal(t, []overrides.Entry{{Key: "global.domainName", Value: "c-1234567.kyma.local"}}, d.Overrides[overrides.Global])
	assert.Equal(t, grafanaSecret, out.Secrets[grafanaKey], "the secret value is copied into this operation's secrets")
	assert.NotContains(t, dataJSON(t, out.Data), grafanaSecret, "secret values never in the data")
	resolved, err := d.Overrides.Resolve(out.Secrets)
	require.NoError(t, err)
	assert.Equal(t, grafanaSecret, resolved["monitoring"][1].Value)
}

// The newest Kyma upgrade (succeeded or failed) knows the resources and overrides; the plan and
// parameters stay the provisioning's.
func TestKymaInitialisation_ResourcesAndOverridesFromTheLatestUpgrade(t *testing.T) {
	e := newEnv(t)
	prev := kymaOp("2.20.0").Data
	prev.Initialized, prev.PlanName = true, "changed-by-mistake"
	prev.Resources = instance.Resources{AVSInternalEvaluationID: 42, EMSInstanceID: "ems-1", EMSBindingID: "bind-1"}
	var secrets storage.Secrets
	prev.Overrides.Set(&secrets, "eventing", overrides.Entry{Key: "creds", Value: "ems-secret", Secret: true})
	upgrade := insertOp(t, e.store, instance.TypeUpgradeKyma, testInstanceID, prev, secrets, storage.StateFailed, t0.Add(-time.Hour))
	// An older upgrade and an unfinished one do not count.
	insertOp(t, e.store, instance.TypeUpgradeKyma, testInstanceID, kymaOp("2.19.5").Data, nil, storage.StateSucceeded, t0.Add(-90*time.Minute))
	insertOp(t, e.store, instance.TypeUpgradeKyma, testInstanceID, kymaOp("2.99.0").Data, nil, storage.StateInProgress, t0.Add(-time.Minute))

	out, _, err := runInit(e, kymaOp("2.21.0"))
	require.NoError(t, err)
	assert.Equal(t, upgrade.ID, out.Data.ProvisioningOperationID)
	assert.Equal(t, prev.Resources, out.Data.Resources)
	assert.Equal(t, overrides.Overrides{"eventing": {{Key: "creds", Secret: true}}}, out.Data.Overrides)
	assert.Equal(t, "ems-secret", out.Secrets[overrides.SecretKey("eventing", "creds")])
	assert.Equal(t, "azure", out.Data.PlanName, "the plan is the provisioning's")
}

func TestKymaInitialisation_NewestProvisioningWins(t *testing.T) {
	e := newEnv(t)
	// A trial resumed later: a newer provisioning with other parameters.
	data, secrets := provisioningData("2.20.0")
	data.Parameters.Name, data.Parameters.Administrators, data.ShootName = "c2", nil, "c-new"
	insertOp(t, e.store, instance.TypeProvision, testInstanceID, data, secrets, storage.StateSucceeded, t0.Add(-time.Hour))

	out, _, err := runInit(e, kymaOp("2.21.0"))
	require.NoError(t, err)
	assert.Equal(t, "c2", out.Data.Name)
	assert.Equal(t, "c-new", out.Data.ShootName)
	assert.Equal(t, []string{"u1"}, out.Data.Administrators, "without administrators the user who provisioned is one")
}

func TestKymaInitialisation_RunsOnce(t *testing.T) {
	e := newEnv(t)
	op := e.initialized(t, "2.21.0")

	// What is stored changes; an initialised upgrade keeps what it read.
	inst, err := e.store.Instances().GetInstance(context.Background(), testInstanceID)
	require.NoError(t, err)
	inst.RuntimeID = ""
	_, err = e.store.Instances().UpdateInstance(context.Background(), inst)
	require.NoError(t, err)
	op.Secrets[overrides.SecretKey("eventing", "extra")] = "x"

	out, wait, err := runInit(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, op.Data, out.Data)
	assert.Equal(t, op.Secrets, out.Secrets)
}

func TestKymaInitialisation_NoRuntimeFails(t *testing.T) {
	e := newEnv(t)
	insertInstance(t, e.store, "inst-2", "")
	op := kymaOp("2.21.0")
	op.InstanceID = "inst-2"

	out, wait, err := runInit(e, op)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "instance inst-2 has no runtime to upgrade")
	assert.False(t, out.Data.Initialized)
}

func TestKymaInitialisation_RetriesWhatIsNotThereYet(t *testing.T) {
	t.Run("instance", func(t *testing.T) {
		e := newEnv(t)
		op := kymaOp("2.21.0")
		op.InstanceID = "inst-missing"
		out, wait, err := runInit(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "reading the instance")
		assert.False(t, out.Data.Initialized)
	})
	t.Run("succeeded provisioning", func(t *testing.T) {
		e := newEnv(t)
		insertInstance(t, e.store, "inst-2", "rt-2")
		insertOp(t, e.store, instance.TypeProvision, "inst-2", instance.ProvisioningData{PlanName: "azure"}, nil, storage.StateFailed, t0.Add(-time.Hour))
		op := kymaOp("2.21.0")
		op.InstanceID = "inst-2"
		out, wait, err := runInit(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Equal(t, "instance inst-2 has no succeeded provisioning", out.LastError)
		assert.False(t, out.Data.Initialized)
	})
}

func TestKymaInitialisation_MissingSecretValueFails(t *testing.T) {
	e := newEnv(t)
	data, _ := provisioningData("2.20.0")
	insertOp(t, e.store, instance.TypeProvision, testInstanceID, data, storage.Secrets{}, storage.StateSucceeded, t0.Add(-time.Hour))

	out, wait, err := runInit(e, kymaOp("2.21.0"))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "copying the runtime's overrides")
	assert.Contains(t, err.Error(), "grafana.clientSecret")
	assert.False(t, out.Data.Initialized)
}
