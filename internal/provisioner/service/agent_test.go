package service

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 35: runtimeConnectionStatus follows what the Runtime Agent reports in the Director
// (through the real Director client and the sandbox's Director over HTTP): a connected runtime
// whose agent reports FAILED is Disconnected, naming reconnectRuntimeAgent; reports are kept a
// while; a Director that cannot be read leaves the operations' status, saying so; a runtime
// being reconnected stays Pending.
func TestConnectionStatusFollowsTheAgentsReport(t *testing.T) {
	e := newTestEnv(t)
	// The sandbox served as sandboxtest.Serve does (which this package cannot import: a cycle).
	sb := sandbox.New(sandbox.Options{})
	require.NoError(t, sb.Register(directorstandin.New(directorstandin.Options{ClientID: "keb", ClientSecret: "s3cret"})))
	srv := httptest.NewServer(sb)
	t.Cleanup(srv.Close)
	base := srv.URL
	dc, err := director.New(director.Config{
		URL: base + "/director/graphql", OAuthTokenURL: base + "/director/oauth/token", OAuthClientID: "keb", OAuthClientSecret: "s3cret",
		Timeout: 2 * time.Second, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond,
	})
	require.NoError(t, err)
	e.svc.ReadConditionsFrom(dc)

	id := e.provision(validInput())
	compassID, err := dc.RegisterRuntime(e.ctx, testTenant, id, "my-runtime", compass.ConditionConnected, nil)
	require.NoError(t, err)
	rt := e.runtime(id)
	rt.CompassRuntimeID = compassID
	_, err = e.store.Runtimes().UpdateRuntime(e.ctx, rt)
	require.NoError(t, err)
	ops, err := e.store.Operations().ListOperations(e.ctx, storage.OperationFilter{InstanceIDs: []string{id}})
	require.NoError(t, err)
	e.finish(ops.Items[0].ID, storage.StateSucceeded, func(op *storage.Operation) {
		op.Progress.Steps = map[string]storage.StepProgress{"Wait_For_Agent_To_Connect": {FirstAttempt: t0, Attempts: 1, Done: true}}
	})
	connection := func() *gqlschema.RuntimeConnectionStatus {
		t.Helper()
		s, err := e.svc.RuntimeStatus(e.ctx, testTenant, id)
		require.NoError(t, err)
		return s.RuntimeConnectionStatus
	}
	later := func() { // past the reports' time to live
		e.mu.Lock()
		e.now = e.now.Add(conditionTTL + time.Second)
		e.mu.Unlock()
	}

	assert.Equal(t, &gqlschema.RuntimeConnectionStatus{Status: gqlschema.RuntimeAgentConnectionStatusConnected}, connection())

	// The agent reports FAILED (as it does with its certificate; here through the same mutation).
	require.NoError(t, dc.SetRuntimeStatusCondition(e.ctx, testTenant, compassID, compass.ConditionFailed))
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, connection().Status, "the report read before is kept a while")
	later()
	c := connection()
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusDisconnected, c.Status)
	require.Len(t, c.Errors, 1)
	assert.Contains(t, *c.Errors[0].Message, "reports FAILED")
	assert.Contains(t, *c.Errors[0].Message, "reconnectRuntimeAgent")

	// Reconnecting: Pending, whatever the Director says; then Connected when the agent is.
	rec, err := e.svc.ReconnectRuntimeAgent(e.ctx, testTenant, id)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusPending, connection().Status)
	e.finish(rec, storage.StateSucceeded, func(op *storage.Operation) {
		op.Progress.Steps = map[string]storage.StepProgress{"Wait_For_Agent_To_Connect": {FirstAttempt: t0, Attempts: 1, Done: true}}
	})
	require.NoError(t, dc.SetRuntimeStatusCondition(e.ctx, testTenant, compassID, compass.ConditionConnected))
	later()
	assert.Equal(t, &gqlschema.RuntimeConnectionStatus{Status: gqlschema.RuntimeAgentConnectionStatusConnected}, connection())

	// The Director down: the operations' status, with why the agent's report is missing.
	now := time.Now()
	require.NoError(t, sb.SetFaults(directorstandin.Name, sandbox.Faults{OutageFrom: now.Add(-time.Minute), OutageUntil: now.Add(time.Hour)}))
	later()
	start := time.Now()
	c = connection()
	assert.Less(t, time.Since(start), conditionReadTimeout+time.Second, "bounded")
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, c.Status)
	require.Len(t, c.Errors, 1)
	assert.Contains(t, *c.Errors[0].Message, "could not be read")
}
