package deprovisioning

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deprovisionOp stores the deprovisioning operation itself, created at t0.
func deprovisionOp(t *testing.T, store storage.Store) Op {
	t.Helper()
	raw := insertOp(t, store, instance.TypeDeprovision, testInstanceID, t0, storage.StateInProgress)
	return Op{Operation: raw, Data: instance.DeprovisioningData{GlobalAccountID: testGA}}
}

func runInit(e *env, op Op) (Op, time.Duration, error) {
	return Initialization{e.deps}.Run(context.Background(), op.ForStep("Deprovision_Initialization", t0), testLog())
}

func TestInitialization_Name(t *testing.T) {
	assert.Equal(t, "Deprovision_Initialization", Initialization{}.Name())
}

func TestInitialization_ReadsRuntimeID(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	op := deprovisionOp(t, e.store)
	op.LastError = "waiting for provision operation x to finish"
	before := getInstance(t, e.store)

	out, wait, err := runInit(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
	assert.Equal(t, testGA, out.Data.GlobalAccountID)
	assert.Empty(t, out.LastError, "the wait is over")
	assert.Equal(t, "deprovisioning the runtime", out.Description)
	assert.Empty(t, e.prov.Calls(), "no provisioner call")
	assert.Equal(t, before.Version, getInstance(t, e.store).Version, "the instance is only read")
}

func TestInitialization_NoRuntime(t *testing.T) {
	e := newEnv(t)
	out, wait, err := runInit(e, deprovisionOp(t, e.store))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.Data.RuntimeID)
}

func TestInitialization_WaitsForOlderActiveOperation(t *testing.T) {
	for _, state := range []storage.OperationState{storage.StatePending, storage.StateInProgress} {
		t.Run(string(state), func(t *testing.T) {
			e := newEnv(t)
			setRuntimeID(t, e.store, "rt-1")
			older := insertOp(t, e.store, instance.TypeUpdate, testInstanceID, t0.Add(-time.Minute), state)
			op := deprovisionOp(t, e.store)

			out, wait, err := runInit(e, op)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Equal(t, "waiting for update operation "+older.ID+" to finish", out.LastError)
			assert.Empty(t, out.Data.RuntimeID, "the runtime is read only once the instance is free")
		})
	}
}

func TestInitialization_GoesOnOnceTheOlderOperationFinished(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	older := insertOp(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Minute), storage.StateInProgress)
	op := deprovisionOp(t, e.store)

	_, wait, err := runInit(e, op)
	require.NoError(t, err)
	require.Equal(t, testPoll, wait)

	older.State, older.DueAt = storage.StateSucceeded, nil
	_, err = e.store.Operations().UpdateOperation(context.Background(), older)
	require.NoError(t, err)

	out, wait, err := runInit(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
	assert.Empty(t, out.LastError)
}

func TestInitialization_DoesNotWaitFor(t *testing.T) {
	for name, other := range map[string]struct {
		opType, instanceID string
		createdAt          time.Time
		state              storage.OperationState
	}{
		"a newer active operation":                 {instance.TypeUpdate, testInstanceID, t0.Add(time.Minute), storage.StatePending},
		"a newer deprovisioning":                   {instance.TypeDeprovision, testInstanceID, t0.Add(time.Second), storage.StateInProgress},
		"an older finished operation":              {instance.TypeProvision, testInstanceID, t0.Add(-time.Hour), storage.StateSucceeded},
		"an older failed operation":                {instance.TypeUpdate, testInstanceID, t0.Add(-time.Hour), storage.StateFailed},
		"an older active operation of another one": {instance.TypeProvision, "inst-other", t0.Add(-time.Hour), storage.StateInProgress},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			setRuntimeID(t, e.store, "rt-1")
			insertOp(t, e.store, other.opType, other.instanceID, other.createdAt, other.state)
			op := deprovisionOp(t, e.store)

			out, wait, err := runInit(e, op)
			require.NoError(t, err)
			assert.Zero(t, wait)
			assert.Empty(t, out.LastError)
			assert.Equal(t, "rt-1", out.Data.RuntimeID)
		})
	}
}

type failingOperations struct{ storage.Operations }

func (failingOperations) ListOperations(context.Context, storage.OperationFilter) (storage.Page[storage.Operation], error) {
	return storage.Page[storage.Operation]{}, errors.New("database is down")
}

func TestInitialization_StorageErrorsPoll(t *testing.T) {
	t.Run("listing operations", func(t *testing.T) {
		e := newEnv(t)
		op := deprovisionOp(t, e.store)
		e.deps.Operations = failingOperations{e.store.Operations()}
		out, wait, err := runInit(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Equal(t, "listing the instance's operations: database is down", out.LastError)
	})
	t.Run("reading the instance", func(t *testing.T) {
		e := newEnv(t)
		op := deprovisionOp(t, e.store)
		op.InstanceID = "inst-missing"
		out, wait, err := runInit(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "reading the instance")
		assert.Empty(t, out.Data.RuntimeID)
	})
}
