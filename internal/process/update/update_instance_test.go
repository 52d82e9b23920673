package update

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runUpdateInstance(e *env, op Op) (Op, time.Duration, error) {
	return steptest.Run(context.Background(), UpdateInstance{e.deps}, op, t0)
}

func TestUpdateInstance_Name(t *testing.T) {
	assert.Equal(t, "Update_Instance_Parameters", UpdateInstance{}.Name())
}

func TestUpdateInstance_WritesPlanAndParameters(t *testing.T) {
	e := newEnv(t)
	before := getInstance(t, e.store)
	data := updateData()
	data.Parameters.OIDC = &instance.OIDC{ClientID: "client", IssuerURL: "https://issuer.example", GroupsClaim: "groups"}

	out, wait, err := runUpdateInstance(e, newOp(data))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Empty(t, e.prov.Calls(), "no provisioner call")

	inst := getInstance(t, e.store)
	assert.Equal(t, "plan-aws", inst.PlanID)
	var stored instance.Parameters
	require.NoError(t, json.Unmarshal(inst.Parameters, &stored))
	assert.Equal(t, data.Parameters, stored)
	assert.Greater(t, inst.Version, before.Version)
	// Everything else is kept.
	assert.Equal(t, before.RuntimeID, inst.RuntimeID)
	assert.Equal(t, before.GlobalAccountID, inst.GlobalAccountID)
	assert.Equal(t, before.SubAccountID, inst.SubAccountID)
	assert.Equal(t, before.ProviderRegion, inst.ProviderRegion)
	assert.Nil(t, inst.DeletedAt)
}

func TestUpdateInstance_RerunIsIdempotent(t *testing.T) {
	e := newEnv(t)
	op := newOp(updateData())
	_, _, err := runUpdateInstance(e, op)
	require.NoError(t, err)
	first := getInstance(t, e.store)
	_, wait, err := runUpdateInstance(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	second := getInstance(t, e.store)
	assert.Equal(t, first.PlanID, second.PlanID)
	assert.JSONEq(t, string(first.Parameters), string(second.Parameters))
}

func TestUpdateInstance_StorageErrorPolls(t *testing.T) {
	e := newEnv(t)
	before := getInstance(t, e.store)
	e.deps.Instances = &steptest.FailingInstances{Instances: e.store.Instances(), Fails: 1}

	out, wait, err := runUpdateInstance(e, newOp(updateData()))
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "storing the instance's parameters: database is down", out.LastError)
	after := getInstance(t, e.store)
	assert.Equal(t, before.PlanID, after.PlanID, "nothing written")
	assert.JSONEq(t, string(before.Parameters), string(after.Parameters))

	_, wait, err = runUpdateInstance(e, out)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "plan-aws", getInstance(t, e.store).PlanID)
}

func TestUpdateInstance_MissingInstancePolls(t *testing.T) {
	e := newEnv(t)
	op := newOp(updateData())
	op.InstanceID = "inst-missing"
	out, wait, err := runUpdateInstance(e, op)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "storing the instance's parameters")
}
