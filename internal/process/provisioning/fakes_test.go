// The step tests are an external test package: they use the real clients of the external systems
// from systemstest, which (through internal/externals) imports this package.
package provisioning_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/clienttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	testInstanceID = "inst-1"
	testOpID       = "op-1"
	testGA         = "ga-1"
	testSA         = "sa-1"
	testPoll       = 7 * time.Second
	// testRetryTime is the systems' retry window (systemstest's, and newEnv's without a sandbox).
	testRetryTime = time.Minute
	// callTimeout bounds one step run against healthy systems; downTimeout one against a system
	// that is down: its client retries until the context ends, as under the engine's RunTimeout.
	callTimeout = 10 * time.Second
	downTimeout = 100 * time.Millisecond
	// testAccountPool is the hyperscaler account pool of newEnv.
	testAccountPool = "aws:kyma-aws;azure:kyma-azure;gcp:kyma-gcp;openstack:kyma-openstack"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// Op is a provisioning operation; step is any provisioning step.
type (
	Op   = provisioning.Op
	step = engine.Step[instance.ProvisioningData]
)

// provCall is one call the steps made to the provisioner.
type provCall = clienttest.Call

// fakeProvisioner is the shared clienttest.Fake (the Runtime Provisioner is not one of the
// sandbox's systems), answering with the funcs as they are when the steps call (nil: not
// implemented).
type fakeProvisioner struct {
	*clienttest.Fake
	provision     func(tenant string, in gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error)
	status        func(tenant, opID string) (*gqlschema.OperationStatus, error)
	runtimeStatus func(tenant, runtimeID string) (*gqlschema.RuntimeStatus, error)
}

func newFakeProvisioner() *fakeProvisioner {
	f := &fakeProvisioner{Fake: &clienttest.Fake{}}
	f.BindProvisionRuntime(&f.provision)
	f.BindRuntimeOperationStatus(&f.status)
	f.BindRuntimeStatus(&f.runtimeStatus)
	return f
}

func strp(s string) *string { return &s }

func opStatus(id string, state gqlschema.OperationState) *gqlschema.OperationStatus {
	st := clienttest.Status(id, "", state)
	st.Operation = gqlschema.OperationTypeProvision
	return st
}

func acceptingProvisioner(runtimeID, opID string) func(string, gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	return func(string, gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
		st := opStatus(opID, gqlschema.OperationStateInProgress)
		st.RuntimeID = strp(runtimeID)
		return st, nil
	}
}

// runtimeStatusOf is the provisioner's status of a finished runtime: its shoot and kubeconfig
// ("" for none).
func runtimeStatusOf(shoot, kubeconfig string) func(string, string) (*gqlschema.RuntimeStatus, error) {
	return func(string, string) (*gqlschema.RuntimeStatus, error) {
		rc := &gqlschema.RuntimeConfig{ClusterConfig: &gqlschema.GardenerConfig{Name: strp(shoot)}}
		if kubeconfig != "" {
			rc.Kubeconfig = strp(kubeconfig)
		}
		return &gqlschema.RuntimeStatus{RuntimeConfiguration: rc}, nil
	}
}

// testClock is the shared test clock.
type testClock = systemstest.Clock

func testDefaults() provisioning.RuntimeDefaults {
	return provisioning.RuntimeDefaults{
		KubernetesVersion: "1.31", KymaVersion: "2.20.0", Components: []string{"istio", "serverless"},
		DashboardURL: "https://dash.example",
	}
}

// env is a step test's world: a real SQLite store holding the instance, the fake provisioner and,
// from newSystemsEnv, every external system's stand-in with the real clients.
type env struct {
	store storage.Store
	prov  *fakeProvisioner
	deps  provisioning.Deps
	clock *testClock
	sb    *systemstest.Env
	// timeout bounds one step run (the engine's RunTimeout).
	timeout time.Duration
}

// newEnv has no external systems (all disabled) but the account pool.
func newEnv(t *testing.T) *env {
	t.Helper()
	store := steptest.OpenStore(t, steptest.IDs{Instance: testInstanceID, GlobalAccount: testGA, SubAccount: testSA})
	pool, err := hyperscaler.ParsePool(testAccountPool)
	require.NoError(t, err)
	prov := newFakeProvisioner()
	return &env{
		store: store, prov: prov, clock: systemstest.NewClock(t0), timeout: callTimeout,
		deps: provisioning.Deps{
			Instances: store.Instances(), Provisioner: prov, PollInterval: testPoll, Defaults: testDefaults(),
			Systems: systems.Systems{AccountPool: pool, RetryTime: testRetryTime, CleanupRetryTime: 5 * time.Minute},
		},
	}
}

// newSystemsEnv serves every stand-in on a loopback server and gives the steps the real clients
// and the shipped default overrides. The stand-ins' time is the env's clock unless o says.
func newSystemsEnv(t *testing.T, o standins.Options) *env {
	t.Helper()
	e := newEnv(t)
	if o.Now == nil {
		o.Now = e.clock.Now
	}
	e.sb = systemstest.Start(t, o)
	e.deps.Systems = e.sb.Systems
	e.deps.Overrides = e.sb.Built.Overrides
	require.Equal(t, testRetryTime, e.deps.Systems.RetryTime)
	return e
}

// run runs s as the engine would at now.
func (e *env) run(s step, op Op, now time.Time) (Op, time.Duration, error) {
	return steptest.RunWithin(e.timeout, s, op, now)
}

// mustRun runs s at now and requires it to finish.
func (e *env) mustRun(t *testing.T, s step, op Op, now time.Time) Op {
	t.Helper()
	out, wait, err := e.run(s, op, now)
	require.NoError(t, err)
	require.Zero(t, wait, "step %s did not finish: %s", s.Name(), out.LastError)
	return out
}

// down makes a sandbox system answer 503 or 500 to everything, and step runs short.
func (e *env) down(t *testing.T, system string) {
	t.Helper()
	e.sb.Down(t, system)
	e.timeout = downTimeout
}

// up heals a sandbox system. It first lets the sandbox answer, while still down, a request that a
// run cut short by its deadline may have left on the wire.
func (e *env) up(t *testing.T, system string) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	e.sb.Faults(t, system, sandbox.Faults{})
	e.timeout = callTimeout
}

// objects reads what exists in a sandbox system into T, the stand-in package's Objects type.
func objects[T any](t *testing.T, e *env, system string) T {
	t.Helper()
	return systemstest.Objects[T](t, e.sb, system)
}

// startedAt records the step's first attempt, as the engine does before its first run.
func startedAt(op Op, stepName string, at time.Time) Op {
	return steptest.Attempted(op, stepName, at, 1)
}

// afterRetryWindow is the engine time once a step first attempted at t0 has tried for longer than
// the systems' retry window.
func afterRetryWindow() time.Time { return t0.Add(testRetryTime + time.Second) }

// assertRetrying checks a step's answer to a temporary failure of system: run again after the poll
// interval, the system named in the operation's last error.
func assertRetrying(t *testing.T, out Op, wait time.Duration, err error, system string) {
	t.Helper()
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.True(t, strings.HasPrefix(out.LastError, system+": "), "last error names %s: %q", system, out.LastError)
}

// assertFailed checks that a step failed the operation naming system and the step.
func assertFailed(t *testing.T, wait time.Duration, err error, system, stepName string) {
	t.Helper()
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.True(t, strings.HasPrefix(err.Error(), system+": "), "error names %s: %v", system, err)
	assert.Contains(t, err.Error(), "step "+stepName)
}

// downThenGiveUp runs s while the sandbox system is down: first it retries with the poll interval,
// then, after the retry window, it fails the operation naming system and step. It returns the
// operation as the first run left it.
func (e *env) downThenGiveUp(t *testing.T, s step, op Op, sandboxName, system string) Op {
	t.Helper()
	e.down(t, sandboxName)
	out, wait, err := e.run(s, startedAt(op, s.Name(), t0), t0)
	assertRetrying(t, out, wait, err, system)
	assert.Contains(t, out.LastError, "temporary failure")

	_, wait, err = e.run(s, out, afterRetryWindow())
	assertFailed(t, wait, err, system, s.Name())
	assert.Contains(t, err.Error(), "gave up after "+testRetryTime.String())
	return out
}

// assertNotInData checks that secret values appear only in the operation's encrypted secrets,
// never in its clear-text data.
func assertNotInData(t *testing.T, op Op, secrets ...string) {
	t.Helper()
	raw, err := json.Marshal(op.Data)
	require.NoError(t, err)
	for _, s := range secrets {
		require.NotEmpty(t, s)
		assert.NotContains(t, string(raw), s, "a secret value is in the operation's data")
	}
}

// getInstance reads the instance the operation belongs to.
func getInstance(t *testing.T, store storage.Store) storage.Instance {
	t.Helper()
	return steptest.GetInstance(t, store, testInstanceID)
}

// provData is the payload the provision handler would store.
func provData(provider, region string) instance.ProvisioningData {
	return instance.ProvisioningData{
		ServiceID: "svc", PlanID: "plan-" + provider, PlanName: provider, Provider: provider, PlatformRegion: "cf-eu10",
		Parameters: instance.Parameters{Name: "c1", Region: region, MachineType: "m1", AutoScalerMin: 3, AutoScalerMax: 5, Administrators: []string{"admin@example.com"}},
		Context:    instance.Context{GlobalAccountID: testGA, SubAccountID: testSA, UserID: "u1"},
	}
}

func newOp(data instance.ProvisioningData) Op {
	return Op{Operation: storage.Operation{ID: testOpID, InstanceID: testInstanceID, Type: instance.TypeProvision, State: storage.StateInProgress, CreatedAt: t0}, Data: data}
}

// ready is a provisioning operation of an Azure runtime the provisioner has finished.
func ready() Op {
	op := newOp(provData("azure", "westeurope"))
	op.Data.KymaVersion = "2.20.0"
	op.Data.TargetSecret = "kyma-azure"
	op.Data.RuntimeID, op.Data.ProvisionerOperationID = "rt-1", "pop-1"
	op.Data.ShootName, op.Data.ShootDomain = "c-1a2b3c", "c-1a2b3c.kyma.example"
	return op
}
