package provisioning

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requested is a provisioning operation whose runtime the provisioner accepted.
func requested() Op {
	op := newOp(provData("azure", "westeurope"))
	op.Data.RuntimeID, op.Data.ProvisionerOperationID = "rt-1", "pop-1"
	return op
}

func runCheck(e *env, op Op) (Op, time.Duration, error) {
	return CheckRuntime{e.deps}.Run(context.Background(), op.ForStep("Check_Runtime", t0), testLog())
}

func statusReturning(st *gqlschema.OperationStatus, err error) func(string, string) (*gqlschema.OperationStatus, error) {
	return func(string, string) (*gqlschema.OperationStatus, error) { return st, err }
}

func TestCheckRuntime_Name(t *testing.T) {
	assert.Equal(t, "Check_Runtime", CheckRuntime{}.Name())
}

func TestCheckRuntime_SucceededSetsDashboardURL(t *testing.T) {
	e := newEnv(t)
	e.prov.status = statusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)

	calls := e.prov.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, provCall{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"}, calls[0])

	inst := getInstance(t, e.store)
	assert.Equal(t, "https://dash.example/?kubeconfigID="+testInstanceID, inst.DashboardURL)
	assert.Nil(t, inst.DeletedAt)
}

func TestCheckRuntime_NotFinishedPolls(t *testing.T) {
	for _, state := range []gqlschema.OperationState{gqlschema.OperationStatePending, gqlschema.OperationStateInProgress} {
		t.Run(string(state), func(t *testing.T) {
			e := newEnv(t)
			e.prov.status = statusReturning(opStatus("pop-1", state), nil)
			before := getInstance(t, e.store)

			op := requested()
			op.LastError = "reading the provisioner's operation: timeout"
			out, wait, err := runCheck(e, op)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Empty(t, out.LastError, "a running operation is no error")
			after := getInstance(t, e.store)
			assert.Equal(t, before.Version, after.Version, "nothing written")
			assert.Empty(t, after.DashboardURL)
		})
	}
}

func TestCheckRuntime_TransientErrorPolls(t *testing.T) {
	e := newEnv(t)
	e.prov.status = statusReturning(nil, errors.New("connection reset"))
	before := getInstance(t, e.store)

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "reading the provisioner's operation: connection reset", out.LastError)
	assert.Equal(t, before.Version, getInstance(t, e.store).Version, "nothing written")
}

func TestCheckRuntime_ProvisionerFailureFails(t *testing.T) {
	for name, tc := range map[string]struct {
		st     *gqlschema.OperationStatus
		reason string
	}{
		"last error": {
			st: &gqlschema.OperationStatus{ID: strp("pop-1"), State: gqlschema.OperationStateFailed,
				Message: strp("generic"), LastError: &gqlschema.LastError{ErrMessage: "quota exceeded in westeurope", Reason: "ERR_INFRA_QUOTA_EXCEEDED"}},
			reason: "quota exceeded in westeurope",
		},
		"message only": {
			st:     &gqlschema.OperationStatus{ID: strp("pop-1"), State: gqlschema.OperationStateFailed, Message: strp("shoot creation timed out")},
			reason: "shoot creation timed out",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.status = statusReturning(tc.st, nil)

			_, wait, err := runCheck(e, requested())
			require.Error(t, err)
			assert.Zero(t, wait)
			assert.Contains(t, err.Error(), "provisioner operation pop-1 failed")
			assert.Contains(t, err.Error(), tc.reason)
			assert.Empty(t, getInstance(t, e.store).DashboardURL)
		})
	}
}

func TestCheckRuntime_InstanceWriteFailurePolls(t *testing.T) {
	e := newEnv(t)
	e.prov.status = statusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	e.deps.Instances = &failingInstances{Instances: e.store.Instances(), fails: 1}

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "storing the dashboard URL")
	assert.Empty(t, getInstance(t, e.store).DashboardURL)

	// The next run stores it.
	_, wait, err = runCheck(e, out)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "https://dash.example/?kubeconfigID="+testInstanceID, getInstance(t, e.store).DashboardURL)
}
