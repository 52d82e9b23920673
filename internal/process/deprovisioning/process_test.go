package deprovisioning

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcess_Definition(t *testing.T) {
	p, err := Process(Deps{}, time.Hour, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeDeprovision, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, map[string][]string{
		"weight_1":  {"Deprovision_Initialization"},
		"weight_10": {"Remove_Runtime"},
	}, p.Stages())

	s, err := SuspensionProcess(Deps{}, time.Hour, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeSuspension, s.Type())
	assert.Equal(t, p.Stages(), s.Stages(), "a suspension runs the same steps")
}

// TestProcess_RunsInWeightOrder runs the process on the engine (real SQLite store, fake
// provisioner): the initialization waits for an older provisioning, then the runtime is removed
// and the instance archived.
func TestProcess_RunsInWeightOrder(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.deprovision = deprovisionAccepted("pop-1")
	e.prov.status = statusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	p, err := Process(e.deps, time.Hour, time.Minute)
	require.NoError(t, err)
	clock := &testClock{t: t0}
	eng, err := process.New(e.store, process.Config{Workers: 1, LeaseDuration: time.Minute, PollInterval: 10 * time.Millisecond}, testLog(), process.WithClock(clock))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	ctx := context.Background()

	// An older provisioning still runs (its type is not registered here, so it stays active).
	prov := insertOp(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Minute), storage.StateInProgress)
	raw, err := process.NewOperation(instance.TypeDeprovision, testInstanceID, instance.DeprovisioningData{GlobalAccountID: testGA}, time.Hour, clock.Now())
	require.NoError(t, err)
	raw, err = e.store.Operations().InsertOperation(ctx, raw)
	require.NoError(t, err)

	_, err = eng.RunDue(ctx)
	require.NoError(t, err)
	op, err := e.store.Operations().GetOperation(ctx, raw.ID)
	require.NoError(t, err)
	assert.Equal(t, "weight_1", op.Stage)
	assert.Equal(t, "waiting for provision operation "+prov.ID+" to finish", op.LastError)
	assert.Empty(t, e.prov.Calls())

	prov.State, prov.DueAt = storage.StateSucceeded, nil
	_, err = e.store.Operations().UpdateOperation(ctx, prov)
	require.NoError(t, err)

	for i := 0; i < 5 && op.State.Active(); i++ {
		clock.Advance(testPoll)
		_, err = eng.RunDue(ctx)
		require.NoError(t, err)
		op, err = e.store.Operations().GetOperation(ctx, raw.ID)
		require.NoError(t, err)
	}
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"weight_1", "weight_10"}, op.Progress.FinishedStages)

	events, err := e.store.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{raw.ID}})
	require.NoError(t, err)
	var trace []string
	for _, ev := range events.Items {
		trace = append(trace, ev.Step+":"+string(ev.Type))
	}
	assert.Equal(t, []string{
		"Deprovision_Initialization:started", "Deprovision_Initialization:retrying",
		"Deprovision_Initialization:started", "Deprovision_Initialization:succeeded",
		"Remove_Runtime:started", "Remove_Runtime:retrying",
		"Remove_Runtime:started", "Remove_Runtime:succeeded",
	}, trace)
	assert.Equal(t, []provCall{
		{Method: "DeprovisionRuntime", Tenant: testGA, ID: "rt-1"},
		{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"},
	}, e.prov.Calls())
	assert.NotNil(t, getInstance(t, e.store).DeletedAt)
}
