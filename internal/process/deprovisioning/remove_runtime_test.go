package deprovisioning

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

func withRuntime(runtimeID, provOpID string) Op {
	return newOp(instance.DeprovisioningData{GlobalAccountID: testGA, RuntimeID: runtimeID, ProvisionerOperationID: provOpID})
}

func runRemove(e *env, op Op, now time.Time) (Op, time.Duration, error) {
	return steptest.Run(context.Background(), RemoveRuntime{e.deps}, op, now)
}

func deprovisionAccepted(opID string) func(string, string) (string, error) {
	return func(string, string) (string, error) { return opID, nil }
}

func TestRemoveRuntime_Name(t *testing.T) {
	assert.Equal(t, "Remove_Runtime", RemoveRuntime{}.Name())
}

func TestRemoveRuntime_FirstRunStoresProvisionerOperation(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.deprovision = deprovisionAccepted("pop-1")
	before := getInstance(t, e.store)

	out, wait, err := runRemove(e, withRuntime("rt-1", ""), t0)
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, wait, "rerun shortly, once the ID is persisted")
	assert.Less(t, wait, testPoll)
	assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID)
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
	assert.Equal(t, []provCall{{Method: "DeprovisionRuntime", Tenant: testGA, ID: "rt-1"}}, e.prov.Calls())

	after := getInstance(t, e.store)
	assert.Equal(t, before.Version, after.Version, "the instance is not touched yet")
	assert.Nil(t, after.DeletedAt)
}

func TestRemoveRuntime_PollsThenArchives(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	state := gqlschema.OperationStateInProgress
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return opStatus("pop-1", state), nil }
	op := withRuntime("rt-1", "pop-1")

	out, wait, err := runRemove(e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Nil(t, getInstance(t, e.store).DeletedAt, "not archived while the provisioner works")

	state = gqlschema.OperationStateSucceeded
	now := t0.Add(testPoll)
	out, wait, err = runRemove(e, out, now)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)

	assert.Equal(t, []provCall{
		{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"},
		{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"},
	}, e.prov.Calls(), "never asks to deprovision again")

	inst := getInstance(t, e.store)
	require.NotNil(t, inst.DeletedAt, "the instance is archived")
	assert.True(t, inst.DeletedAt.Equal(now), "archived at the step's time, got %s", inst.DeletedAt)
	assert.Equal(t, "rt-1", inst.RuntimeID, "an archived instance keeps its runtime ID for the record")
}

func TestRemoveRuntime_FullSequence(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.deprovision = deprovisionAccepted("pop-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)

	out, wait, err := runRemove(e, withRuntime("rt-1", ""), t0)
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, wait)
	out, wait, err = runRemove(e, out, t0.Add(wait))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID)
	assert.NotNil(t, getInstance(t, e.store).DeletedAt)
	calls := e.prov.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, "DeprovisionRuntime", calls[0].Method)
	assert.Equal(t, "RuntimeOperationStatus", calls[1].Method)
}

func TestRemoveRuntime_NotFoundMeansAlreadyGone(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.deprovision = func(string, string) (string, error) { return "", apperr.NotFound("runtime %s not found", "rt-1") }

	out, wait, err := runRemove(e, withRuntime("rt-1", ""), t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Empty(t, out.Data.RuntimeID)
	assert.Empty(t, out.Data.ProvisionerOperationID)
	assert.Len(t, e.prov.Calls(), 1, "nothing to poll")
	inst := getInstance(t, e.store)
	require.NotNil(t, inst.DeletedAt)
	assert.True(t, inst.DeletedAt.Equal(t0))
}

func TestRemoveRuntime_NoRuntimeJustArchives(t *testing.T) {
	e := newEnv(t)
	out, wait, err := runRemove(e, withRuntime("", ""), t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Empty(t, e.prov.Calls(), "no runtime, no provisioner call")
	require.NotNil(t, getInstance(t, e.store).DeletedAt)
}

func TestRemoveRuntime_DeprovisionRequestRetries(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		wantMsg string
	}{
		"conflict waits": {apperr.Conflict("operation pop-0 in progress"), "the runtime is busy: operation pop-0 in progress"},
		"transient":      {errors.New("connection refused"), "calling the provisioner: connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			setRuntimeID(t, e.store, "rt-1")
			e.prov.deprovision = func(string, string) (string, error) { return "", tc.err }
			before := getInstance(t, e.store)

			out, wait, err := runRemove(e, withRuntime("rt-1", ""), t0)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Equal(t, tc.wantMsg, out.LastError)
			assert.Equal(t, "rt-1", out.Data.RuntimeID)
			assert.Empty(t, out.Data.ProvisionerOperationID)
			after := getInstance(t, e.store)
			assert.Equal(t, before.Version, after.Version, "nothing written")
			assert.Nil(t, after.DeletedAt)
		})
	}
}

func TestRemoveRuntime_StatusErrorPolls(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.status = steptest.StatusReturning(nil, errors.New("timeout"))

	out, wait, err := runRemove(e, withRuntime("rt-1", "pop-1"), t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "reading the provisioner's operation: timeout", out.LastError)
	assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID, "keeps polling the same operation")
	assert.Nil(t, getInstance(t, e.store).DeletedAt)
}

func TestRemoveRuntime_ProvisionerFailureFails(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	st := opStatus("pop-1", gqlschema.OperationStateFailed)
	st.LastError = &gqlschema.LastError{ErrMessage: "shoot deletion is blocked by a finalizer"}
	e.prov.status = steptest.StatusReturning(st, nil)

	_, wait, err := runRemove(e, withRuntime("rt-1", "pop-1"), t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "provisioner operation pop-1 failed")
	assert.Contains(t, err.Error(), "shoot deletion is blocked by a finalizer")
	assert.Nil(t, getInstance(t, e.store).DeletedAt, "a failed deprovisioning does not archive")
}

func TestRemoveRuntime_ArchiveFailurePolls(t *testing.T) {
	e := newEnv(t)
	e.deps.Instances = &steptest.FailingInstances{Instances: e.store.Instances(), Fails: 1}

	out, wait, err := runRemove(e, withRuntime("", ""), t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "archiving the instance: database is down", out.LastError)
	assert.Nil(t, getInstance(t, e.store).DeletedAt)

	out, wait, err = runRemove(e, out, t0.Add(testPoll))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.NotNil(t, getInstance(t, e.store).DeletedAt)
}

func TestRemoveRuntime_SuspensionKeepsTheInstance(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	op := withRuntime("rt-1", "pop-1")
	op.Type = instance.TypeSuspension

	_, wait, err := runRemove(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	inst := getInstance(t, e.store)
	assert.Nil(t, inst.DeletedAt, "a suspended instance stays")
	assert.Empty(t, inst.RuntimeID, "but has no runtime any more")
}

// A rerun after the outcome was lost (the engine lost its lease after archiving) archives nothing
// again: the instance keeps the time it was archived at.
func TestRemoveRuntime_RerunKeepsTheArchiveTime(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	op := withRuntime("rt-1", "pop-1")

	_, wait, err := runRemove(e, op, t0)
	require.NoError(t, err)
	require.Zero(t, wait)
	archived := getInstance(t, e.store)
	require.NotNil(t, archived.DeletedAt)

	out, wait, err := runRemove(e, op, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	inst := getInstance(t, e.store)
	require.NotNil(t, inst.DeletedAt)
	assert.True(t, inst.DeletedAt.Equal(t0), "archived at the first run's time, got %s", inst.DeletedAt)
}

// The provisioner keeps the runtime's deprovisioning busy: the step polls it until the
// operation's deadline (the engine's), asking to deprovision only once.
func TestRemoveRuntime_PollsWhileTheProvisionerWorks(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.deprovision = deprovisionAccepted("pop-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateInProgress), nil)

	out, wait, err := runRemove(e, withRuntime("rt-1", ""), t0)
	require.NoError(t, err)
	now := t0
	for i := 0; i < 3; i++ {
		now = now.Add(wait)
		out, wait, err = runRemove(e, out, now)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
	}
	calls := e.prov.Calls()
	require.Len(t, calls, 4)
	assert.Equal(t, "DeprovisionRuntime", calls[0].Method)
	for _, c := range calls[1:] {
		assert.Equal(t, provCall{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"}, c)
	}
	assert.Nil(t, getInstance(t, e.store).DeletedAt)
}

// A provisioner deprovisioning that succeeded but left something behind (its Director step given
// up) makes Remove_Runtime not completed with the provisioner's words, so the broker's
// deprovisioning says what was left and where instead of a plain "succeeded".
func TestRemoveRuntime_PassesOnWhatTheProvisionerLeftBehind(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) {
		st := opStatus("pop-1", gqlschema.OperationStateSucceeded)
		msg := "operation succeeded; not completed: Wait_For_Cluster_Deletion (Director: unregistering the runtime: HTTP 500)"
		st.Message = &msg
		return st, nil
	}
	out, wait, err := runRemove(e, withRuntime("rt-1", "pop-1"), t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, out.Progress.ExecutedButNotCompleted, "Remove_Runtime")
	assert.Equal(t, "Runtime Provisioner: not completed: Wait_For_Cluster_Deletion (Director: unregistering the runtime: HTTP 500)", out.LastError)
	require.NotNil(t, getInstance(t, e.store).DeletedAt, "archived all the same")
}

// A plain success leaves the step completed (the kill -9 acceptance test caught the contrary).
func TestRemoveRuntime_PlainSuccessIsComplete(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) {
		st := opStatus("pop-1", gqlschema.OperationStateSucceeded)
		msg := "operation succeeded"
		st.Message = &msg
		return st, nil
	}
	out, _, err := runRemove(e, withRuntime("rt-1", "pop-1"), t0)
	require.NoError(t, err)
	assert.Empty(t, out.Progress.ExecutedButNotCompleted)
	assert.Empty(t, out.LastError)
}
