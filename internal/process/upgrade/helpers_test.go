package upgrade

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/clienttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/require"
)

const (
	testInstanceID = "inst-1"
	testGA         = "ga-1"
	testSA         = "sa-1"
	testRuntimeID  = "rt-1"
	testPoll       = 7 * time.Second
	// testRetryTime and testCleanupRetryTime are systemstest's windows, used without a sandbox too.
	testRetryTime        = time.Minute
	testCleanupRetryTime = 5 * time.Minute
	testKubeconfig       = "apiVersion: v1\nkind: Config\nclusters: [{name: rt-1}]\n"
	// grafanaSecret is the secret override value the provisioning stored.
	grafanaSecret = "s3cr3t-grafana"
)

var (
	t0             = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	grafanaKey     = overrides.SecretKey("monitoring", "grafana.clientSecret")
	emsCredentials = overrides.SecretKey(provisioning.EventingComponent, provisioning.EMSCredentialsKey)
	kafkaPassword  = overrides.SecretKey(provisioning.KafkaComponent, provisioning.KafkaPasswordKey)
)

// testClock is the shared test clock.
type testClock = systemstest.Clock

func strp(s string) *string { return &s }

// fakeProvisioner is the shared clienttest.Fake answering the calls the upgrade steps make with
// the funcs as they are at each call (nil: not implemented).
type fakeProvisioner struct {
	*clienttest.Fake
	upgrade       func(tenant, runtimeID string, in gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error)
	shoot         func(tenant, runtimeID string, in gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error)
	runtimeStatus func(tenant, runtimeID string) (*gqlschema.RuntimeStatus, error)
	status        func(tenant, opID string) (*gqlschema.OperationStatus, error)
}

func newFakeProvisioner() *fakeProvisioner {
	f := &fakeProvisioner{Fake: &clienttest.Fake{}}
	f.BindUpgradeRuntime(&f.upgrade)
	f.BindUpgradeShoot(&f.shoot)
	f.BindRuntimeStatus(&f.runtimeStatus)
	f.BindRuntimeOperationStatus(&f.status)
	return f
}

// methods lists the methods of the calls made so far.
func (f *fakeProvisioner) methods() []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, c.Method)
	}
	return out
}

func opStatus(id string, state gqlschema.OperationState) *gqlschema.OperationStatus {
	return clienttest.Status(id, testRuntimeID, state)
}

// accepting answers an upgrade request with the in-progress provisioner operation id.
func accepting[I any](id string) func(string, string, I) (*gqlschema.OperationStatus, error) {
	return func(string, string, I) (*gqlschema.OperationStatus, error) {
		return opStatus(id, gqlschema.OperationStateInProgress), nil
	}
}

// statuses answers RuntimeOperationStatus with states in turn, the last one from then on.
func statuses(id string, states ...gqlschema.OperationState) func(string, string) (*gqlschema.OperationStatus, error) {
	var mu sync.Mutex
	n := 0
	return func(string, string) (*gqlschema.OperationStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		st := states[min(n, len(states)-1)]
		n++
		return opStatus(id, st), nil
	}
}

func withKubeconfig(kc string) func(string, string) (*gqlschema.RuntimeStatus, error) {
	return func(string, string) (*gqlschema.RuntimeStatus, error) {
		return &gqlschema.RuntimeStatus{RuntimeConfiguration: &gqlschema.RuntimeConfig{Kubeconfig: strp(kc)}}, nil
	}
}

// env is one test's store (with the instance and its provisioning), provisioner fake, clock and,
// for steps that call external systems, the sandbox.
type env struct {
	store storage.Store
	prov  *fakeProvisioner
	clock *testClock
	sb    *systemstest.Env // nil without a sandbox
	deps  Deps
}

// newEnv stores the instance, with its runtime, and its succeeded Kyma 2 provisioning; external
// systems are disabled (no sandbox).
func newEnv(t *testing.T) *env {
	t.Helper()
	store := steptest.OpenStore(t, steptest.IDs{Instance: testInstanceID, Runtime: testRuntimeID, GlobalAccount: testGA, SubAccount: testSA})
	prov := newFakeProvisioner()
	e := &env{store: store, prov: prov, clock: systemstest.NewClock(t0)}
	e.deps = Deps{
		Instances: store.Instances(), Operations: store.Operations(), Provisioner: prov, PollInterval: testPoll,
		Defaults: provisioning.RuntimeDefaults{KymaVersion: "2.20.0", Components: []string{"istio", "serverless"}},
		Systems:  systems.Systems{RetryTime: testRetryTime, CleanupRetryTime: testCleanupRetryTime},
	}
	data, secrets := provisioningData("2.19.0")
	insertOp(t, store, instance.TypeProvision, testInstanceID, data, secrets, storage.StateSucceeded, t0.Add(-2*time.Hour))
	return e
}

// newSandboxEnv is newEnv with every external system served by the stand-ins, on the env's clock.
func newSandboxEnv(t *testing.T, o standins.Options) *env {
	t.Helper()
	e := newEnv(t)
	o.Now = e.clock.Now
	e.sb = systemstest.Start(t, o)
	e.deps.Systems = e.sb.Systems
	return e
}

// insertInstance stores another instance of the test accounts.
func insertInstance(t *testing.T, store storage.Store, id, runtimeID string) {
	t.Helper()
	steptest.SeedInstance(t, store, steptest.IDs{Instance: id, Runtime: runtimeID, GlobalAccount: testGA, SubAccount: testSA})
}

// insertOp stores a finished operation of the instance as the engine would have left it.
func insertOp(t *testing.T, store storage.Store, opType, instanceID string, data any, secrets storage.Secrets, state storage.OperationState, created time.Time) storage.Operation {
	t.Helper()
	op, err := engine.NewOperation(opType, instanceID, data, time.Hour, created)
	require.NoError(t, err)
	op.State, op.DueAt, op.Secrets, op.Description = state, nil, secrets, "operation "+string(state)
	op, err = store.Operations().InsertOperation(context.Background(), op)
	require.NoError(t, err)
	return op
}

// provisioningData is a succeeded Azure provisioning of Kyma version, with a plain and a secret
// override and an AVS evaluation; its secrets hold the secret override's value.
func provisioningData(version string) (instance.ProvisioningData, storage.Secrets) {
	d := instance.ProvisioningData{
		ServiceID: "svc", PlanID: "plan-azure", PlanName: "azure", Provider: "azure", PlatformRegion: "cf-eu10",
		Parameters: instance.Parameters{Name: "c1", Region: "westeurope", Administrators: []string{"admin@example.com"}},
		Context:    instance.Context{GlobalAccountID: testGA, SubAccountID: testSA, UserID: "u1"},
		RuntimeID:  testRuntimeID, KymaVersion: version, ShootName: "c-1234567", ShootDomain: "c-1234567.kyma.local",
		Resources: instance.Resources{AVSInternalEvaluationID: 42},
	}
	var secrets storage.Secrets
	d.Overrides.Set(&secrets, "monitoring",
		overrides.Entry{Key: "grafana.clientID", Value: "grafana-id"},
		overrides.Entry{Key: "grafana.clientSecret", Value: grafanaSecret, Secret: true})
	d.Overrides.Set(&secrets, overrides.Global, overrides.Entry{Key: "global.domainName", Value: "c-1234567.kyma.local"})
	return d, secrets
}

// kymaOp is a Kyma upgrade to version as the operator API creates it.
func kymaOp(version string) KymaOp {
	return KymaOp{
		Operation: storage.Operation{ID: "op-up-1", InstanceID: testInstanceID, Type: instance.TypeUpgradeKyma, State: storage.StateInProgress, CreatedAt: t0},
		Data:      instance.UpgradeKymaData{KymaVersion: version},
	}
}

// clusterOp is a cluster upgrade as the operator API creates it.
func clusterOp(data instance.UpgradeClusterData) ClusterOp {
	return ClusterOp{
		Operation: storage.Operation{ID: "op-uc-1", InstanceID: testInstanceID, Type: instance.TypeUpgradeCluster, State: storage.StateInProgress, CreatedAt: t0},
		Data:      data,
	}
}

// initialized is a Kyma upgrade to version after Upgrade_Kyma_Initialisation ran.
func (e *env) initialized(t *testing.T, version string) KymaOp {
	t.Helper()
	out, wait, err := steptest.Run(context.Background(), KymaInitialisation{e.deps}, kymaOp(version), t0)
	require.NoError(t, err)
	require.Zero(t, wait, out.LastError)
	return out
}

// tryingSince records that step first ran at first, as the engine would have.
func tryingSince[T any](op engine.Operation[T], step string, first time.Time) engine.Operation[T] {
	return steptest.Attempted(op, step, first, 3)
}

// downCtx bounds a step run against a system that is down: the clients retry until the context
// ends.
func downCtx(t *testing.T) context.Context { return sandboxtest.Context(t, 100*time.Millisecond) }

// objects reads what exists in a sandbox system into T, the stand-in package's Objects type.
func objects[T any](t *testing.T, e *env, system string) T {
	t.Helper()
	return systemstest.Objects[T](t, e.sb, system)
}

// dataJSON is the operation's clear-text data as the store keeps it.
func dataJSON(t *testing.T, data any) string {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	return string(raw)
}

// clone deep-copies v (overrides and secrets are maps a step changes in place).
func clone[T any](t *testing.T, v T) T {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }
