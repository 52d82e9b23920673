package systems_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/clienttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func opAt(now time.Time) *engine.Operation[struct{}] {
	op := engine.Operation[struct{}]{Operation: storage.Operation{Progress: storage.Progress{Steps: map[string]storage.StepProgress{
		"EDP_Registration": {FirstAttempt: t0},
	}}}}
	op = op.ForStep("EDP_Registration", now)
	return &op
}

func TestTemporaryClassifiesClientAndOtherErrors(t *testing.T) {
	assert.True(t, systems.Temporary(&clientkit.Error{Op: "x", Temporary: true, Err: errors.New("503")}))
	assert.False(t, systems.Temporary(&clientkit.Error{Op: "x", StatusCode: 400, Err: errors.New("400")}))
	assert.False(t, systems.Temporary(clientkit.Permanent(errors.New("bad"))))
	assert.True(t, systems.Temporary(errors.New("connection reset")))
}

func TestRetryRetriesTemporaryErrorsWithinTheWindowAndNamesSystemAndStep(t *testing.T) {
	s := systems.Systems{RetryTime: time.Minute}
	temp := &clientkit.Error{Op: "registering", Temporary: true, Err: errors.New("503")}

	op := opAt(t0.Add(30 * time.Second))
	wait, err := s.Retry(op, "EDP", "registering the runtime", temp, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, wait)
	assert.Contains(t, op.LastError, "EDP: registering the runtime")

	op = opAt(t0.Add(time.Minute))
	_, err = s.Retry(op, "EDP", "registering the runtime", temp, 5*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "EDP: registering the runtime")
	assert.Contains(t, err.Error(), "step EDP_Registration gave up after 1m0s")

	op = opAt(t0)
	_, err = s.Retry(op, "EDP", "registering the runtime", &clientkit.Error{Op: "x", StatusCode: 404, Err: errors.New("no namespace")}, time.Second)
	require.Error(t, err, "a permanent error fails at once")
	assert.Contains(t, err.Error(), "step EDP_Registration failed")
}

func TestCleanupGivesUpWithoutFailing(t *testing.T) {
	s := systems.Systems{CleanupRetryTime: 5 * time.Minute}
	op := opAt(t0.Add(time.Minute))
	assert.Equal(t, time.Second, s.Cleanup(op, "EDP", "deregistering", errors.New("down"), time.Second))
	assert.Empty(t, op.Progress.ExecutedButNotCompleted)

	op = opAt(t0.Add(5 * time.Minute))
	assert.Zero(t, s.Cleanup(op, "EDP", "deregistering", errors.New("down"), time.Second))
	assert.Equal(t, []string{"EDP_Registration"}, op.Progress.ExecutedButNotCompleted)
	assert.Contains(t, op.LastError, "EDP: deregistering")
}

func TestCleanupRecordsAPermanentAnswerAsNotCompletedAtOnce(t *testing.T) {
	s := systems.Systems{CleanupRetryTime: 5 * time.Minute}
	forbidden := &clientkit.Error{Op: "deleting data tenant", StatusCode: 403, Attempts: 1, Err: &clientkit.StatusError{Code: 403, Body: "forbidden"}}
	op := opAt(t0) // the step's first run
	assert.Zero(t, s.Cleanup(op, "EDP", "deregistering the runtime", forbidden, time.Second), "no window of retries")
	assert.Equal(t, []string{"EDP_Registration"}, op.Progress.ExecutedButNotCompleted)
	assert.Equal(t, "EDP: deregistering the runtime: deleting data tenant: permanent failure after 1 attempt(s): HTTP 403: forbidden", op.LastError)
}

func TestSMCredentialsPreferTheContexts(t *testing.T) {
	env := systemstest.Start(t, standins.Options{})
	def, ok := env.Systems.SMCredentials(nil)
	require.True(t, ok, "the broker's default credentials")

	var secrets storage.Secrets
	instance.SMCredentials{ClientID: "ctx-id", ClientSecret: "ctx-secret", URL: "https://sm.ctx", TokenURL: "https://uaa.ctx"}.Put(&secrets)
	got, ok := env.Systems.SMCredentials(secrets)
	require.True(t, ok)
	assert.Equal(t, "ctx-id", got.ClientID)
	assert.Equal(t, "https://sm.ctx", got.URL)
	assert.NotEqual(t, def.ClientID, got.ClientID)

	_, ok = systems.Systems{}.SMCredentials(secrets)
	assert.False(t, ok, "without a Service Manager there are no credentials")
}

func TestAwaitProvisioner(t *testing.T) {
	var status func(tenant, id string) (*gqlschema.OperationStatus, error)
	prov := &clienttest.Fake{}
	prov.BindRuntimeOperationStatus(&status)
	ctx := context.Background()

	status = func(string, string) (*gqlschema.OperationStatus, error) { return nil, errors.New("connection refused") }
	op := opAt(t0)
	wait, err := systems.AwaitProvisioner(ctx, prov, op, "ga", "pop", 7*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 7*time.Second, wait, "a read failure is polled again")
	assert.Contains(t, op.LastError, "connection refused")

	status = func(string, string) (*gqlschema.OperationStatus, error) {
		return clienttest.Status("pop", "", gqlschema.OperationStateInProgress), nil
	}
	wait, err = systems.AwaitProvisioner(ctx, prov, op, "ga", "pop", 7*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 7*time.Second, wait)
	assert.Empty(t, op.LastError, "the operation was read")
	assert.False(t, op.WaitSignaled(), "a remote provisioner wakes nobody: the wait polls as any other")
	signaling := opAt(t0)
	wait, err = systems.AwaitProvisioner(ctx, signalingFake{prov}, signaling, "ga", "pop", 7*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 7*time.Second, wait)
	assert.True(t, signaling.WaitSignaled(), "the embedded provisioner's operation wakes the wait when it finishes")

	status = func(string, string) (*gqlschema.OperationStatus, error) {
		return clienttest.Status("pop", "", gqlschema.OperationStateSucceeded), nil
	}
	wait, err = systems.AwaitProvisioner(ctx, prov, op, "ga", "pop", 7*time.Second)
	require.NoError(t, err)
	assert.Zero(t, wait)

	status = func(string, string) (*gqlschema.OperationStatus, error) {
		st := clienttest.Status("pop", "", gqlschema.OperationStateFailed)
		st.LastError = &gqlschema.LastError{ErrMessage: "no capacity"}
		return st, nil
	}
	_, err = systems.AwaitProvisioner(ctx, prov, op, "ga", "pop", 7*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no capacity")
}

// signalingFake is a provisioner whose finished operations wake their waiters (as the
// in-process client's).
type signalingFake struct{ *clienttest.Fake }

func (signalingFake) SignalsFinishedOperations() bool { return true }
