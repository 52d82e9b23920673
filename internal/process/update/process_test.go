package update

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcess_Definition(t *testing.T) {
	p, err := Process(Deps{}, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeUpdate, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, map[string][]string{
		"weight_10": {"Upgrade_Shoot"},
		"weight_15": {"Update_Kyma_Modules"},
		"weight_20": {"Update_Instance_Parameters"},
	}, p.Stages())
}

// TestProcess_RunsInWeightOrder runs the process on the engine (real SQLite store, fake
// provisioner): the instance gets its new plan and parameters only after the shoot was upgraded.
func TestProcess_RunsInWeightOrder(t *testing.T) {
	e := newEnv(t)
	e.prov.upgradeShoot = shootAccepted("pop-1")
	state := gqlschema.OperationStateInProgress
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return opStatus("pop-1", state), nil }
	p, err := Process(e.deps, time.Hour)
	require.NoError(t, err)
	clock := systemstest.NewClock(t0)
	eng := steptest.Engine(t, e.store, clock, p)
	ctx := context.Background()

	raw := steptest.StartOperation(t, e.store, instance.TypeUpdate, testInstanceID, updateData(), clock.Now())
	op := steptest.RunRounds(t, eng, e.store, clock, raw.ID, 3, time.Second)
	assert.Equal(t, storage.StateInProgress, op.State)
	assert.Equal(t, "weight_10", op.Stage)
	assert.Equal(t, "plan-azure", getInstance(t, e.store).PlanID, "not written before the shoot is upgraded")

	state = gqlschema.OperationStateSucceeded
	clock.Advance(testPoll)
	_, err = eng.RunDue(ctx)
	require.NoError(t, err)
	op = steptest.GetOperation(t, e.store, raw.ID)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"weight_10", "weight_15", "weight_20"}, op.Progress.FinishedStages)

	events, err := e.store.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{raw.ID}})
	require.NoError(t, err)
	var steps []string
	for _, ev := range events.Items {
		if ev.Type == storage.EventSucceeded {
			steps = append(steps, ev.Step)
		}
	}
	assert.Equal(t, []string{"Upgrade_Shoot", "Update_Kyma_Modules", "Update_Instance_Parameters"}, steps)

	calls := e.prov.Calls()
	require.NotEmpty(t, calls)
	assert.Equal(t, "UpgradeShoot", calls[0].Method)
	for _, c := range calls[1:] {
		assert.Equal(t, "RuntimeOperationStatus", c.Method)
	}

	inst := getInstance(t, e.store)
	assert.Equal(t, "plan-aws", inst.PlanID)
	var stored instance.Parameters
	require.NoError(t, json.Unmarshal(inst.Parameters, &stored))
	assert.Equal(t, updateData().Parameters, stored)
}
