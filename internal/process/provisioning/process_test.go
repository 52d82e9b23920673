package provisioning

import (
	"context"
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
	assert.Equal(t, instance.TypeProvision, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, map[string][]string{
		StageCreateRuntime: {"Initialization", "Create_Runtime"},
		StageCheckRuntime:  {"Check_Runtime"},
	}, p.Stages())

	_, err = Process(Deps{}, 0)
	assert.Error(t, err, "a process needs a timeout")
}

// TestProcess_RunsStagesInOrder runs the process on the engine (real SQLite store, fake
// provisioner) and checks that the steps ran in stage order and their effects.
func TestProcess_RunsStagesInOrder(t *testing.T) {
	e := newEnv(t)
	polls := 0
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) {
		polls++
		if polls == 1 {
			return opStatus("pop-1", gqlschema.OperationStateInProgress), nil
		}
		return opStatus("pop-1", gqlschema.OperationStateSucceeded), nil
	}
	p, err := Process(e.deps, time.Hour)
	require.NoError(t, err)
	clock := &testClock{t: t0}
	eng, err := process.New(e.store, process.Config{Workers: 1, LeaseDuration: time.Minute, PollInterval: 10 * time.Millisecond}, testLog(), process.WithClock(clock))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))

	ctx := context.Background()
	raw, err := process.NewOperation(instance.TypeProvision, testInstanceID, provData("gcp", "europe-west3"), time.Hour, clock.Now())
	require.NoError(t, err)
	raw, err = e.store.Operations().InsertOperation(ctx, raw)
	require.NoError(t, err)

	_, err = eng.RunDue(ctx)
	require.NoError(t, err)
	op, err := e.store.Operations().GetOperation(ctx, raw.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StateInProgress, op.State, "Check_Runtime waits for the provisioner")
	assert.Equal(t, StageCheckRuntime, op.Stage)
	assert.Equal(t, []string{StageCreateRuntime}, op.Progress.FinishedStages)

	clock.Advance(testPoll)
	_, err = eng.RunDue(ctx)
	require.NoError(t, err)
	op, err = e.store.Operations().GetOperation(ctx, raw.ID)
	require.NoError(t, err)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{StageCreateRuntime, StageCheckRuntime}, op.Progress.FinishedStages)

	events, err := e.store.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{raw.ID}})
	require.NoError(t, err)
	var trace []string
	for _, ev := range events.Items {
		trace = append(trace, ev.Step+":"+string(ev.Type))
	}
	assert.Equal(t, []string{
		"Initialization:started", "Initialization:succeeded",
		"Create_Runtime:started", "Create_Runtime:succeeded",
		"Check_Runtime:started", "Check_Runtime:retrying",
		"Check_Runtime:started", "Check_Runtime:succeeded",
	}, trace)

	var calls []string
	for _, c := range e.prov.Calls() {
		calls = append(calls, c.Method)
	}
	assert.Equal(t, []string{"ProvisionRuntime", "RuntimeOperationStatus", "RuntimeOperationStatus"}, calls)
	assert.Equal(t, raw.ID, e.prov.Calls()[0].Provision.RuntimeInput.Labels[IdempotencyLabel])

	inst := getInstance(t, e.store)
	assert.Equal(t, "rt-1", inst.RuntimeID)
	assert.Equal(t, "https://dash.example/?kubeconfigID="+testInstanceID, inst.DashboardURL)
}
