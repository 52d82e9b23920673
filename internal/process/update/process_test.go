package update

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestProcess_Definition(t *testing.T) {
	p, err := Process(Deps{}, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeUpdate, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, map[string][]string{
		"weight_10": {"Upgrade_Shoot"},
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
	clock := &testClock{t: t0}
	eng, err := process.New(e.store, process.Config{Workers: 1, LeaseDuration: time.Minute, PollInterval: 10 * time.Millisecond}, testLog(), process.WithClock(clock))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	ctx := context.Background()

	raw, err := process.NewOperation(instance.TypeUpdate, testInstanceID, updateData(), time.Hour, clock.Now())
	require.NoError(t, err)
	raw, err = e.store.Operations().InsertOperation(ctx, raw)
	require.NoError(t, err)

	get := func() storage.Operation {
		op, err := e.store.Operations().GetOperation(ctx, raw.ID)
		require.NoError(t, err)
		return op
	}
	for i := 0; i < 3; i++ {
		_, err = eng.RunDue(ctx)
		require.NoError(t, err)
		clock.Advance(time.Second)
	}
	op := get()
	assert.Equal(t, storage.StateInProgress, op.State)
	assert.Equal(t, "weight_10", op.Stage)
	assert.Equal(t, "plan-azure", getInstance(t, e.store).PlanID, "not written before the shoot is upgraded")

	state = gqlschema.OperationStateSucceeded
	clock.Advance(testPoll)
	_, err = eng.RunDue(ctx)
	require.NoError(t, err)
	op = get()
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"weight_10", "weight_20"}, op.Progress.FinishedStages)

	events, err := e.store.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{raw.ID}})
	require.NoError(t, err)
	var steps []string
	for _, ev := range events.Items {
		if ev.Type == storage.EventSucceeded {
			steps = append(steps, ev.Step)
		}
	}
	assert.Equal(t, []string{"Upgrade_Shoot", "Update_Instance_Parameters"}, steps)

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
