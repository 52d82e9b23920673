package operations_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// The Director steps against the real client and the sandbox's Director stand-in: what a failing,
// forgetful or lossy Director does to them.

type directorEnv struct {
	*env
	sb     *sandbox.Sandbox
	st     *directorstandin.StandIn
	client *director.Client
}

func newDirectorEnv(t *testing.T, seed uint64) *directorEnv {
	// a breaker opened by a test's outage lets the next call through once the Director is back
	return newDirectorEnvWith(t, seed, clientkit.Calls{BreakerCooldown: time.Millisecond})
}

func newDirectorEnvWith(t *testing.T, seed uint64, calls clientkit.Calls) *directorEnv {
	t.Helper()
	e := newEnv(t)
	st := directorstandin.New(directorstandin.Options{ClientID: "keb", ClientSecret: "s3cret", ConnectorURL: "https://connector.sandbox.example/graphql"})
	sb, base := sandboxtest.Serve(t, sandbox.Options{Seed: seed}, st)
	c := sandboxtest.NewClient(t, director.New, director.Config{
		URL: base + "/director/graphql", OAuthTokenURL: base + "/director/oauth/token", OAuthClientID: "keb", OAuthClientSecret: "s3cret",
		Timeout: 2 * time.Second, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 5 * time.Millisecond,
		Config: clientkit.Config{Calls: calls},
	})
	e.deps.Director = c
	return &directorEnv{env: e, sb: sb, st: st, client: c}
}

// registered inserts a ready runtime registered in the Director and returns its operation's Data.
func (e *directorEnv) registered(id string) operations.Data {
	e.t.Helper()
	data := e.runtimeData(id, true, true)
	op, wait, err := operations.RegisterRuntime{Deps: e.deps}.Run(e.ctx, stepOp("Register_Runtime", t0, data), testLog())
	require.NoError(e.t, err)
	require.Zero(e.t, wait, op.LastError)
	return op.Data
}

func (e *directorEnv) runtimeObject(compassID string) directorstandin.Object {
	e.t.Helper()
	for _, rt := range e.st.Snapshot().Tenants[tenant] {
		if rt.ID == compassID {
			return rt
		}
	}
	e.t.Fatalf("runtime %s not in the Director", compassID)
	return directorstandin.Object{}
}

// startedAt is an operation whose step first ran at first, as the engine records it.
func startedAt(step string, first, now time.Time, data operations.Data) operations.Op {
	op := stepOp(step, now, data)
	op.Progress.Steps = map[string]storage.StepProgress{step: {FirstAttempt: first, Attempts: 1}}
	return op.ForStep(step, now)
}

func TestConnectRuntimeAgentLeavesOneValidToken(t *testing.T) {
	e := newDirectorEnv(t, 7)
	data := e.registered("rt-1")
	step := operations.ConnectRuntimeAgent{Deps: e.deps}

	// a run whose outcome is lost (the process died before saving): its token stays issued
	e.rt.set(func(r *fakeRuntime) { r.writeErr = errTransient })
	failed, wait, err := step.Run(e.ctx, stepOp(step.Name(), t0, data), testLog())
	require.NoError(t, err)
	require.Positive(t, wait)
	kept := failed.Secrets["agentToken"]
	require.NotEmpty(t, kept, "the token is kept with the operation")
	keptSecrets := storage.Secrets{}
	for k, v := range failed.Secrets {
		keptSecrets[k] = v
	}
	_, _, err = step.Run(e.ctx, stepOp(step.Name(), t0, data), testLog())
	require.NoError(t, err)
	assert.Equal(t, 1, e.runtimeObject(data.CompassRuntimeID).ValidTokens, "a new token revokes the earlier one")

	// the saved retry reuses its young token instead of asking for another one
	issued := e.runtimeObject(data.CompassRuntimeID).TokensIssued
	e.rt.set(func(r *fakeRuntime) { r.writeErr = nil })
	done, wait, err := step.Run(e.ctx, failed.ForStep(step.Name(), t0.Add(time.Minute)), testLog())
	require.NoError(t, err)
	require.Zero(t, wait, done.LastError)
	assert.Equal(t, issued, e.runtimeObject(data.CompassRuntimeID).TokensIssued, "no new token")
	written := e.rt.snapshot().written
	assert.Equal(t, kept, written[len(written)-1].Token)
	assert.Empty(t, done.Secrets["agentToken"], "the agent has it; the operation does not keep it")

	// an old kept token is not handed out: a new one replaces it
	issued = e.runtimeObject(data.CompassRuntimeID).TokensIssued
	failed.Secrets = keptSecrets
	_, wait, err = step.Run(e.ctx, failed.ForStep(step.Name(), t0.Add(5*time.Minute)), testLog())
	require.NoError(t, err)
	require.Zero(t, wait)
	assert.Equal(t, issued+1, e.runtimeObject(data.CompassRuntimeID).TokensIssued)
	assert.Equal(t, 1, e.runtimeObject(data.CompassRuntimeID).ValidTokens)
}

func TestConnectRuntimeAgentUnderLostAnswers(t *testing.T) {
	// the breaker is off: this test's runs follow each other faster than any cool-down
	e := newDirectorEnvWith(t, 11, clientkit.Calls{BreakerThreshold: -1})
	var ids []string
	for _, id := range []string{"rt-1", "rt-2", "rt-3", "rt-4", "rt-5", "rt-6"} {
		data := e.registered(id)
		ids = append(ids, data.CompassRuntimeID)
		require.NoError(t, e.sb.SetFaults(directorstandin.Name, sandbox.Faults{LostResponseRate: 0.5}))
		op := stepOp("Connect_Runtime_Agent", t0, data)
		for i := 0; ; i++ {
			require.Less(t, i, 100, "Connect_Runtime_Agent did not finish: %s", op.LastError)
			out, wait, err := operations.ConnectRuntimeAgent{Deps: e.deps}.Run(e.ctx, op.ForStep("Connect_Runtime_Agent", t0.Add(time.Duration(i)*time.Second)), testLog())
			require.NoError(t, err)
			if wait == 0 {
				break
			}
			op = out
		}
		require.NoError(t, e.sb.SetFaults(directorstandin.Name, sandbox.Faults{}))
	}
	st, err := e.sb.Stats(directorstandin.Name)
	require.NoError(t, err)
	assert.Positive(t, st.LostResponses)
	for _, id := range ids {
		assert.Equal(t, 1, e.runtimeObject(id).ValidTokens, "exactly one valid token for %s", id)
	}
}

func TestDirectorStepsFailAtOnceOnAnAnswerWaitingWillNotChange(t *testing.T) {
	e := newDirectorEnv(t, 3)
	data := e.registered("rt-1")
	// the Director forgot the runtime (e.g. a stand-in that lost its state): labelling it cannot succeed
	require.NoError(t, e.client.UnregisterRuntime(e.ctx, tenant, data.CompassRuntimeID))
	data.ClusterDomain = "rt-1.kyma.example"
	_, wait, err := operations.WaitForClusterDomain{Deps: e.deps}.Run(e.ctx, stepOp("Wait_For_Cluster_Domain", t0, data), testLog())
	require.Error(t, err, "not retried until the stage limit")
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "Director: labelling the runtime")
	assert.Contains(t, err.Error(), "NotFound")
	assert.Contains(t, err.Error(), "step Wait_For_Cluster_Domain failed")

	// a tenant that cannot be put into a request header
	bad := e.runtimeData("rt-2", true, false)
	bad.Tenant = "acme\ninjected"
	_, _, err = operations.RegisterRuntime{Deps: e.deps}.Run(e.ctx, stepOp("Register_Runtime", t0, bad), testLog())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "control character")
	assert.Empty(t, e.st.Snapshot().RegistrationsByRuntimeID["rt-2"])
}

func TestDirectorDownIsRetriedWithinTheWindowNamingIt(t *testing.T) {
	e := newDirectorEnv(t, 5)
	data := e.runtimeData("rt-1", true, false)
	sandboxtest.Outage(t, e.sb, directorstandin.Name)
	step := operations.RegisterRuntime{Deps: e.deps}

	start := time.Now()
	op, wait, err := step.Run(e.ctx, startedAt(step.Name(), t0, t0, data), testLog())
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "a bounded attempt, not a wait for the Director")
	assert.Equal(t, pollInterval, wait)
	assert.Contains(t, op.LastError, "Director: registering the runtime")
	assert.Contains(t, op.LastError, "temporary failure after 3 attempt(s)")
	assert.Contains(t, op.LastError, "503")

	_, _, err = step.Run(e.ctx, startedAt(step.Name(), t0, t0.Add(10*time.Minute), op.Data), testLog())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Director: registering the runtime")
	assert.Contains(t, err.Error(), "gave up after 10m0s")
}

func TestDeprovisioningDoesNotWaitForTheDirector(t *testing.T) {
	e := newDirectorEnv(t, 9)
	data := e.registered("rt-1")
	data.RequestedAt = map[string]time.Time{"delete": t0}
	e.backend.set(func(b *fakeBackend) { b.deleted = true })
	sandboxtest.Outage(t, e.sb, directorstandin.Name)
	step := operations.WaitForClusterDeletion{Deps: e.deps}

	op, wait, err := step.Run(e.ctx, startedAt(step.Name(), t0, t0.Add(time.Minute), data), testLog())
	require.NoError(t, err)
	assert.Equal(t, pollInterval, wait, "retried within the cleanup window")
	assert.Contains(t, op.LastError, "Director: unregistering the runtime")
	assert.False(t, e.runtime("rt-1").Deleted)

	op, wait, err = step.Run(e.ctx, startedAt(step.Name(), t0, t0.Add(5*time.Minute), op.Data), testLog())
	require.NoError(t, err, "never fails the deprovisioning")
	assert.Zero(t, wait)
	assert.Equal(t, []string{step.Name()}, op.Progress.ExecutedButNotCompleted)
	assert.Contains(t, op.LastError, "Director: unregistering the runtime")
	assert.Contains(t, op.LastError, "503")
	assert.True(t, e.runtime("rt-1").Deleted, "the deletion goes on")

	// a permanent answer: recorded at once
	e2 := newDirectorEnv(t, 10)
	data2 := e2.registered("rt-2")
	data2.Tenant = "acme\ninjected"
	e2.backend.set(func(b *fakeBackend) { b.deleted = true })
	op, wait, err = operations.WaitForClusterDeletion{Deps: e2.deps}.Run(e2.ctx, startedAt("Wait_For_Cluster_Deletion", t0, t0, data2), testLog())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, []string{"Wait_For_Cluster_Deletion"}, op.Progress.ExecutedButNotCompleted)
	assert.True(t, e2.runtime("rt-2").Deleted)
}
