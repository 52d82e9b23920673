package deprovisioning

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/clienttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shared setup of the package's tests: a real SQLite store, the clienttest provisioner and, for
// the steps that clean up external systems, the sandbox's stand-ins with the real clients.

const (
	testInstanceID = "inst-1"
	testGA         = "ga-1"
	testSA         = "sa-1"
	testPoll       = 7 * time.Second
	// downCallTimeout bounds a step's calls to a system that answers 503: the clients retry
	// until their context ends.
	downCallTimeout = 100 * time.Millisecond
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// provCall is one call the steps made to the provisioner.
type provCall = clienttest.Call

// fakeProvisioner is the shared clienttest.Fake, answering DeprovisionRuntime with deprovision and
// RuntimeOperationStatus with status (nil: not implemented), as they are when the steps call.
type fakeProvisioner struct {
	*clienttest.Fake
	deprovision func(tenant, runtimeID string) (string, error)
	status      func(tenant, opID string) (*gqlschema.OperationStatus, error)
}

func newFakeProvisioner() *fakeProvisioner {
	f := &fakeProvisioner{Fake: &clienttest.Fake{}}
	f.BindDeprovisionRuntime(&f.deprovision)
	f.BindRuntimeOperationStatus(&f.status)
	return f
}

func opStatus(id string, state gqlschema.OperationState) *gqlschema.OperationStatus {
	st := clienttest.Status(id, "", state)
	st.Operation = gqlschema.OperationTypeDeprovision
	return st
}

// testClock is the shared test clock.
type testClock = systemstest.Clock

// getInstance reads the instance the operation belongs to.
func getInstance(t *testing.T, store storage.Store) storage.Instance {
	t.Helper()
	return steptest.GetInstance(t, store, testInstanceID)
}

type env struct {
	store storage.Store
	prov  *fakeProvisioner
	deps  Deps
	// sys and clock are set by newSystemsEnv: the sandbox and the stand-ins' time.
	sys   *systemstest.Env
	clock *testClock
	// callTimeout bounds one step run's calls (the engine's RunTimeout).
	callTimeout time.Duration
}

// newEnv has every external system disabled (Deps.Systems zero).
func newEnv(t *testing.T) *env {
	t.Helper()
	store := steptest.OpenStore(t, steptest.IDs{Instance: testInstanceID, GlobalAccount: testGA, SubAccount: testSA})
	prov := newFakeProvisioner()
	return &env{store: store, prov: prov, callTimeout: 10 * time.Second,
		deps: Deps{Instances: store.Instances(), Operations: store.Operations(), Provisioner: prov, PollInterval: testPoll}}
}

// newSystemsEnv is newEnv with every external system served by the sandbox's stand-ins, whose
// time is e.clock unless o.Now is set.
func newSystemsEnv(t *testing.T, o standins.Options) *env {
	t.Helper()
	e := newEnv(t)
	e.clock = systemstest.NewClock(t0)
	if o.Now == nil {
		o.Now = e.clock.Now
	}
	e.sys = systemstest.Start(t, o)
	e.deps.Systems = e.sys.Systems
	return e
}

// down makes a sandbox system answer 503 to everything, and step runs give up on it quickly.
func (e *env) down(t *testing.T, system string) {
	t.Helper()
	e.sys.Down(t, system)
	e.callTimeout = downCallTimeout
}

// up heals a system taken down.
func (e *env) up(t *testing.T, system string) {
	t.Helper()
	e.sys.Faults(t, system, sandbox.Faults{})
	e.callTimeout = 10 * time.Second
}

// loseResponses has a system handle a third of the requests but answer them with 502, so the
// clients retry changes that were made: only idempotent calls come out with one change.
func (e *env) loseResponses(t *testing.T, system string) {
	t.Helper()
	e.sys.Faults(t, system, sandbox.Faults{LostResponseRate: 0.3})
}

// lostResponses is how many answers the system lost.
func (e *env) lostResponses(t *testing.T, system string) int {
	t.Helper()
	st, err := e.sys.Sandbox.Stats(system)
	require.NoError(t, err)
	return st.LostResponses
}

// runStep runs step on op as the engine does at now, its calls bounded by e.callTimeout.
func runStep(e *env, step engine.Step[instance.DeprovisioningData], op Op, now time.Time) (Op, time.Duration, error) {
	return steptest.RunWithin(e.callTimeout, step, op, now)
}

// testCtx is a context for the tests' own calls to the sandbox through the real clients.
func testCtx(t *testing.T) context.Context { return sandboxtest.Context(t, 10*time.Second) }

// objects reads what exists in a sandbox system into T, the stand-in package's Objects type.
func objects[T any](t *testing.T, e *env, system string) T {
	t.Helper()
	return systemstest.Objects[T](t, e.sys, system)
}

func newOp(data instance.DeprovisioningData) Op {
	return Op{Operation: storage.Operation{ID: "op-1", InstanceID: testInstanceID, Type: instance.TypeDeprovision, State: storage.StateInProgress, CreatedAt: t0}, Data: data}
}

// withResources is a deprovisioning operation past its initialization, removing res.
func withResources(res instance.Resources) Op {
	return newOp(instance.DeprovisioningData{GlobalAccountID: testGA, Initialized: true, Resources: res})
}

// pastCleanupWindow makes op a step's run whose first attempt was at t0 and returns the time the
// cleanup retry window ends, when the step gives up; justBefore is the last second within it.
func pastCleanupWindow(e *env, op Op, step string) (out Op, past, justBefore time.Time) {
	op.Progress.Steps = map[string]storage.StepProgress{step: {FirstAttempt: t0, Attempts: 12}}
	window := e.deps.Systems.CleanupRetryTime
	return op, t0.Add(window), t0.Add(window - time.Second)
}

// assertRetrying checks a cleanup step's answer to a failing system: no error, run again after
// the poll interval, the system named in LastError, not given up.
func assertRetrying(t *testing.T, out Op, wait time.Duration, err error, system string) {
	t.Helper()
	require.NoError(t, err, "a deprovisioning step never fails the operation")
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, system+": ")
	assert.Empty(t, out.Progress.ExecutedButNotCompleted)
}

// assertGaveUp checks a cleanup step's answer after its retry window: no error, done, recorded
// as executed but not completed, the system named in LastError.
func assertGaveUp(t *testing.T, out Op, wait time.Duration, err error, step, system string) {
	t.Helper()
	require.NoError(t, err, "a deprovisioning step never fails the operation")
	assert.Zero(t, wait, "the operation goes on")
	assert.Equal(t, []string{step}, out.Progress.ExecutedButNotCompleted)
	assert.Contains(t, out.LastError, system+": ")
}

// assertDone checks a cleanup step that finished.
func assertDone(t *testing.T, out Op, wait time.Duration, err error) {
	t.Helper()
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Empty(t, out.Progress.ExecutedButNotCompleted)
}

// insertOp stores an operation of the instance created at createdAt in the given state.
func insertOp(t *testing.T, store storage.Store, opType, instanceID string, createdAt time.Time, state storage.OperationState) storage.Operation {
	t.Helper()
	return insertOpData(t, store, opType, instanceID, createdAt, state, struct{}{}, nil)
}

// insertOpData is insertOp with a payload and secrets, such as a provisioning that created
// resources.
func insertOpData(t *testing.T, store storage.Store, opType, instanceID string, createdAt time.Time, state storage.OperationState, data any, secrets storage.Secrets) storage.Operation {
	t.Helper()
	c := context.Background()
	raw, err := engine.NewOperation(opType, instanceID, data, time.Hour, createdAt)
	require.NoError(t, err)
	raw.Secrets = secrets
	op, err := store.Operations().InsertOperation(c, raw)
	require.NoError(t, err)
	if state != storage.StatePending {
		op.State = state
		if !state.Active() {
			op.DueAt = nil
		}
		op, err = store.Operations().UpdateOperation(c, op)
		require.NoError(t, err)
	}
	return op
}

// provisioned stores a finished provisioning of the instance that created res, an hour before t0.
func provisioned(t *testing.T, store storage.Store, res instance.Resources) storage.Operation {
	t.Helper()
	return insertOpData(t, store, instance.TypeProvision, testInstanceID, t0.Add(-time.Hour), storage.StateSucceeded,
		instance.ProvisioningData{RuntimeID: "rt-1", Context: instance.Context{GlobalAccountID: testGA, SubAccountID: testSA}, Resources: res}, nil)
}

// setRuntimeID gives the stored instance a runtime, as provisioning did.
func setRuntimeID(t *testing.T, store storage.Store, runtimeID string) {
	t.Helper()
	_, err := storage.ModifyInstance(context.Background(), store.Instances(), testInstanceID, func(i *storage.Instance) { i.RuntimeID = runtimeID })
	require.NoError(t, err)
}

// rejectedSystems are the real clients pointed at e's sandbox with credentials the stand-ins
// reject (as after a rotation on the system's side): every call fails permanently.
func (e *env) rejectedSystems(t *testing.T, wrong func(*standins.Credentials)) systems.Systems {
	t.Helper()
	cfg, err := externals.Load()
	require.NoError(t, err)
	creds := standins.DefaultCredentials()
	wrong(&creds)
	standins.PointAt(&cfg, e.sys.URL, creds)
	cfg.Settings.RetryTime, cfg.Settings.CleanupRetryTime = e.deps.Systems.RetryTime, e.deps.Systems.CleanupRetryTime
	built, err := cfg.Build()
	require.NoError(t, err)
	return built.Systems
}

// requests is how many requests a sandbox system received.
func (e *env) requests(t *testing.T, system string) int {
	t.Helper()
	st, err := e.sys.Sandbox.Stats(system)
	require.NoError(t, err)
	return st.Requests
}

// runUntilDone runs step as the engine would, moving the clock by each wait, until it is done
// (at most 5 runs).
func runUntilDone(t *testing.T, e *env, step engine.Step[instance.DeprovisioningData], op Op) Op {
	t.Helper()
	for i := 0; i < 5; i++ {
		out, wait, err := runStep(e, step, op, e.clock.Now())
		require.NoError(t, err)
		if wait == 0 {
			return out
		}
		op = out
		e.clock.Advance(wait)
	}
	t.Fatalf("step %s not done after 5 runs: %s", step.Name(), op.LastError)
	return op
}

// cleanupStep describes a deprovisioning step that removes objects from one external system,
// for the checks every such step must pass (testCleanupStep).
type cleanupStep struct {
	step func(Deps) engine.Step[instance.DeprovisioningData]
	// sandbox is the stand-in's name; system the name the step's errors give it.
	sandbox, system string
	// create makes the runtime's objects in the sandbox through the real clients, as provisioning
	// does, and returns the resources naming them.
	create func(t *testing.T, e *env) instance.Resources
	// cleared is what is left of the resources once the step removed them.
	cleared func(instance.Resources) instance.Resources
	// remaining counts the runtime's objects in the sandbox; deletions counts the deletions the
	// stand-in performed.
	remaining, deletions func(t *testing.T, e *env) int
	// wrongCredentials, when set, makes the system reject the broker's credentials.
	wrongCredentials func(*standins.Credentials)
}

// testCleanupStep checks what every cleanup step does: removes what provisioning created and
// clears it from the operation, touches nothing it has no record of, survives reruns and lost
// answers without double deletions, retries a failing system within the cleanup window naming it,
// and then gives up without failing the operation.
func testCleanupStep(t *testing.T, c cleanupStep) {
	start := func(t *testing.T) (*env, engine.Step[instance.DeprovisioningData], instance.Resources) {
		e := newSystemsEnv(t, standins.Options{Seed: 7})
		res := c.create(t, e)
		require.Positive(t, c.remaining(t, e), "the objects exist before the step runs")
		return e, c.step(e.deps), res
	}
	t.Run("removes the objects", func(t *testing.T) {
		e, step, res := start(t)
		n := c.remaining(t, e)
		out := runUntilDone(t, e, step, withResources(res))
		assertDone(t, out, 0, nil)
		assert.Equal(t, c.cleared(res), out.Data.Resources)
		assert.Zero(t, c.remaining(t, e))
		assert.Equal(t, n, c.deletions(t, e), "each object deleted once")
		assert.Empty(t, out.Secrets)
	})
	t.Run("nothing recorded, nothing asked", func(t *testing.T) {
		e, step, _ := start(t)
		before, n := e.requests(t, c.sandbox), c.remaining(t, e)
		out, wait, err := runStep(e, step, withResources(instance.Resources{}), t0)
		assertDone(t, out, wait, err)
		assert.Equal(t, before, e.requests(t, c.sandbox), "no call to %s", c.system)
		assert.Equal(t, n, c.remaining(t, e), "objects the operation does not name stay")
	})
	t.Run("run twice", func(t *testing.T) {
		e, step, res := start(t)
		out := runUntilDone(t, e, step, withResources(res))
		before, deletions := e.requests(t, c.sandbox), c.deletions(t, e)
		out, wait, err := runStep(e, step, out, e.clock.Now())
		assertDone(t, out, wait, err)
		assert.Equal(t, before, e.requests(t, c.sandbox), "what was cleared is not deleted again")
		assert.Equal(t, deletions, c.deletions(t, e))
	})
	t.Run("rerun after the outcome was lost", func(t *testing.T) {
		e, step, res := start(t)
		op := withResources(res)
		runUntilDone(t, e, step, op)
		deletions := c.deletions(t, e)
		// The engine did not persist the outcome (lease lost): the step runs again on the old data.
		out := runUntilDone(t, e, step, op)
		assert.Equal(t, c.cleared(res), out.Data.Resources)
		assert.Zero(t, c.remaining(t, e))
		assert.Equal(t, deletions, c.deletions(t, e), "an object already gone counts as deleted")
	})
	t.Run("lost responses", func(t *testing.T) {
		// Which answers get lost depends on the sandbox's seed: try a few.
		lost := 0
		for seed := uint64(1); seed <= 4; seed++ {
			e := newSystemsEnv(t, standins.Options{Seed: seed})
			res := c.create(t, e)
			n := c.remaining(t, e)
			e.loseResponses(t, c.sandbox)
			out := runUntilDone(t, e, c.step(e.deps), withResources(res))
			lost += e.lostResponses(t, c.sandbox)
			t.Logf("seed %d: %d answers lost", seed, e.lostResponses(t, c.sandbox))
			assert.Equal(t, c.cleared(res), out.Data.Resources)
			assert.Zero(t, c.remaining(t, e))
			assert.Equal(t, n, c.deletions(t, e), "each object deleted once (seed %d)", seed)
		}
		assert.Positive(t, lost, "some answers were lost")
	})
	t.Run("system down: retried, then done", func(t *testing.T) {
		e, step, res := start(t)
		n := c.remaining(t, e)
		e.down(t, c.sandbox)
		out, wait, err := runStep(e, step, withResources(res), t0)
		assertRetrying(t, out, wait, err, c.system)
		assert.Contains(t, out.LastError, "temporary")
		assert.Equal(t, res, out.Data.Resources, "nothing cleared")
		assert.Equal(t, n, c.remaining(t, e))

		e.up(t, c.sandbox)
		e.clock.Advance(wait)
		out = runUntilDone(t, e, step, out)
		assert.Equal(t, c.cleared(res), out.Data.Resources)
		assert.Zero(t, c.remaining(t, e))
	})
	t.Run("system down past the cleanup window: recorded, not failed", func(t *testing.T) {
		e, step, res := start(t)
		n := c.remaining(t, e)
		e.down(t, c.sandbox)
		op, past, justBefore := pastCleanupWindow(e, withResources(res), step.Name())

		out, wait, err := runStep(e, step, op, justBefore)
		assertRetrying(t, out, wait, err, c.system)

		out, wait, err = runStep(e, step, op, past)
		assertGaveUp(t, out, wait, err, step.Name(), c.system)
		assert.Equal(t, res, out.Data.Resources, "what is left behind stays on record")
		assert.Equal(t, n, c.remaining(t, e))
	})
	if c.wrongCredentials == nil {
		return
	}
	t.Run("credentials rejected: a permanent answer, recorded at once", func(t *testing.T) {
		e, _, res := start(t)
		n := c.remaining(t, e)
		e.deps.Systems = e.rejectedSystems(t, c.wrongCredentials)
		step := c.step(e.deps)

		// no window of retries: waiting will not change the answer
		out, wait, err := runStep(e, step, withResources(res), t0)
		assertGaveUp(t, out, wait, err, step.Name(), c.system)
		assert.Contains(t, out.LastError, "permanent")
		assert.Regexp(t, `HTTP 40[13]|"invalid_client"`, out.LastError, "the system's answer")
		assert.Equal(t, res, out.Data.Resources, "what is left behind stays on record")
		assert.Equal(t, n, c.remaining(t, e))
	})
}

// sum adds a stand-in's per-name counts.
func sum(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}
