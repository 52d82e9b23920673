package operations_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// t0 is the explicit time the tests start at.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

const (
	pollInterval = 10 * time.Second
	backendName  = "fake"
	tenant       = "tenant-a"
	kubeconfig   = "apiVersion: v1\nkind: Config\n# fake\n"
)

var errTransient = errors.New("connection reset by peer")

func testLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	if !testing.Verbose() {
		l.SetOutput(io.Discard)
	}
	return l
}

// --- clock -------------------------------------------------------------------

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// --- infrastructure.Backend --------------------------------------------------

type fakeBackend struct {
	mu sync.Mutex

	createErr    error
	status       infrastructure.Status
	statusErr    error
	kubeconfig   string
	kubeErr      error
	updateRev    int64
	updateErr    error
	hibernateErr error
	deleteErr    error
	deleted      bool
	deletedErr   error

	calls map[string][]infrastructure.Spec
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{kubeconfig: kubeconfig, calls: map[string][]infrastructure.Spec{}}
}

func (b *fakeBackend) record(method string, spec infrastructure.Spec) {
	b.calls[method] = append(b.calls[method], spec)
}

// Calls returns the specs the method was called with.
func (b *fakeBackend) Calls(method string) []infrastructure.Spec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]infrastructure.Spec(nil), b.calls[method]...)
}

func (b *fakeBackend) set(f func(b *fakeBackend)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

func (b *fakeBackend) Create(_ context.Context, spec infrastructure.Spec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("Create", spec)
	return b.createErr
}

func (b *fakeBackend) Status(_ context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("Status", spec)
	return b.status, b.statusErr
}

func (b *fakeBackend) Kubeconfig(_ context.Context, spec infrastructure.Spec) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("Kubeconfig", spec)
	return b.kubeconfig, b.kubeErr
}

func (b *fakeBackend) Update(_ context.Context, spec infrastructure.Spec) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("Update", spec)
	return b.updateRev, b.updateErr
}

func (b *fakeBackend) Hibernate(_ context.Context, spec infrastructure.Spec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("Hibernate", spec)
	return b.hibernateErr
}

func (b *fakeBackend) Delete(_ context.Context, spec infrastructure.Spec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("Delete", spec)
	return b.deleteErr
}

func (b *fakeBackend) Deleted(_ context.Context, spec infrastructure.Spec) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("Deleted", spec)
	return b.deleted, b.deletedErr
}

// fakeBackends is an operations.Backends of named fakes.
type fakeBackends map[string]infrastructure.Backend

func (f fakeBackends) Get(name string) (infrastructure.Backend, error) {
	if b, ok := f[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("%w %q", infrastructure.ErrUnknownBackend, name)
}

// --- runtimeclient.Factory / Runtime -----------------------------------------

type fakeRuntime struct {
	mu sync.Mutex

	bindingsErr error
	admins      [][]string

	applyErr error
	applied  []runtimeclient.KymaSpec

	kymaState string
	kymaMsg   string
	kymaErr   error
	kymaSince []time.Time

	deleteErr   error
	deleteCalls int

	writeErr error
	written  []runtimeclient.AgentConfig

	connState string
	connErr   error
	connSince []time.Time
}

func (r *fakeRuntime) set(f func(r *fakeRuntime)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *fakeRuntime) snapshot() fakeRuntime {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fakeRuntime{
		admins: append([][]string(nil), r.admins...), applied: append([]runtimeclient.KymaSpec(nil), r.applied...),
		kymaSince: append([]time.Time(nil), r.kymaSince...), deleteCalls: r.deleteCalls,
		written: append([]runtimeclient.AgentConfig(nil), r.written...), connSince: append([]time.Time(nil), r.connSince...),
	}
}

func (r *fakeRuntime) ApplyOperatorBindings(_ context.Context, administrators []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.admins = append(r.admins, administrators)
	return r.bindingsErr
}

func (r *fakeRuntime) ApplyKyma(_ context.Context, spec runtimeclient.KymaSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, spec)
	return r.applyErr
}

func (r *fakeRuntime) KymaState(_ context.Context, _ runtimeclient.KymaSpec, since time.Time) (string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kymaSince = append(r.kymaSince, since)
	return r.kymaState, r.kymaMsg, r.kymaErr
}

func (r *fakeRuntime) DeleteKyma(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleteCalls++
	return r.deleteErr
}

func (r *fakeRuntime) WriteAgentConfig(_ context.Context, cfg runtimeclient.AgentConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = append(r.written, cfg)
	return r.writeErr
}

func (r *fakeRuntime) ConnectionState(_ context.Context, since time.Time) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connSince = append(r.connSince, since)
	return r.connState, r.connErr
}

// fakeClusters opens rt for any kubeconfig and remembers the kubeconfigs it was given.
type fakeClusters struct {
	mu          sync.Mutex
	rt          *fakeRuntime
	err         error
	kubeconfigs []string
}

func (f *fakeClusters) ForKubeconfig(kc string) (runtimeclient.Runtime, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kubeconfigs = append(f.kubeconfigs, kc)
	if f.err != nil {
		return nil, f.err
	}
	return f.rt, nil
}

func (f *fakeClusters) Opened() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.kubeconfigs...)
}

// --- director.Client ---------------------------------------------------------

type registerCall struct {
	Tenant, RuntimeID, Name, Condition string
	Labels                             map[string]any
}

type labelsCall struct {
	Tenant, CompassID string
	Labels            map[string]string
}

type conditionCall struct {
	Tenant, CompassID, Condition string
}

type fakeDirector struct {
	mu sync.Mutex

	compassID   string
	registerErr error
	registered  []registerCall

	labelsErr error
	labelled  []labelsCall

	token    compass.Token
	tokenErr error
	tokens   []string // compass IDs tokens were requested for

	unregisterErr error
	unregistered  []string

	conditionErr error
	conditions   []conditionCall
}

func (d *fakeDirector) set(f func(d *fakeDirector)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *fakeDirector) snapshot() fakeDirector {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fakeDirector{
		registered: append([]registerCall(nil), d.registered...), labelled: append([]labelsCall(nil), d.labelled...),
		tokens: append([]string(nil), d.tokens...), unregistered: append([]string(nil), d.unregistered...),
		conditions: append([]conditionCall(nil), d.conditions...),
	}
}

func (d *fakeDirector) RegisterRuntime(_ context.Context, tenant, runtimeID, name, condition string, labels map[string]any) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.registered = append(d.registered, registerCall{tenant, runtimeID, name, condition, labels})
	if d.registerErr != nil {
		return "", d.registerErr
	}
	return d.compassID, nil
}

func (d *fakeDirector) UpdateRuntimeLabels(_ context.Context, tenant, compassID string, labels map[string]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.labelled = append(d.labelled, labelsCall{tenant, compassID, labels})
	return d.labelsErr
}

func (d *fakeDirector) RequestOneTimeToken(_ context.Context, _, compassID string) (compass.Token, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tokens = append(d.tokens, compassID)
	return d.token, d.tokenErr
}

func (d *fakeDirector) UnregisterRuntime(_ context.Context, _, compassID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unregistered = append(d.unregistered, compassID)
	return d.unregisterErr
}

func (d *fakeDirector) SetRuntimeStatusCondition(_ context.Context, tenant, compassID, condition string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conditions = append(d.conditions, conditionCall{tenant, compassID, condition})
	return d.conditionErr
}

// --- storage.Runtimes with injected faults -----------------------------------

// faultyRuntimes is the real store with its writes (UpdateRuntime, SetRuntimeFields) failing:
// with updateErr for the next failUpdates calls (negative: always).
type faultyRuntimes struct {
	storage.Runtimes
	mu          sync.Mutex
	updateErr   error
	failUpdates int
	updates     int
	reads       int
}

func (f *faultyRuntimes) GetRuntime(ctx context.Context, id string) (storage.Runtime, error) {
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	return f.Runtimes.GetRuntime(ctx, id)
}

func (f *faultyRuntimes) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *faultyRuntimes) UpdateRuntime(ctx context.Context, rt storage.Runtime) (storage.Runtime, error) {
	if err := f.write(); err != nil {
		return storage.Runtime{}, err
	}
	return f.Runtimes.UpdateRuntime(ctx, rt)
}

func (f *faultyRuntimes) SetRuntimeFields(ctx context.Context, id string, fields storage.RuntimeFields) error {
	if err := f.write(); err != nil {
		return err
	}
	return f.Runtimes.SetRuntimeFields(ctx, id, fields)
}

// write counts a write and returns its injected failure.
func (f *faultyRuntimes) write() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates++
	if f.failUpdates == 0 {
		return nil
	}
	if f.failUpdates > 0 {
		f.failUpdates--
	}
	return f.updateErr
}

// --- environment ---------------------------------------------------------------

// env is a real SQLite store with fakes for everything outside the provisioner.
type env struct {
	t        *testing.T
	ctx      context.Context
	store    storage.Store
	backend  *fakeBackend
	rt       *fakeRuntime
	clusters *fakeClusters
	director *fakeDirector
	deps     operations.Deps
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	store, err := driver.Open(ctx, driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}, testLog())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	e := &env{
		t: t, ctx: ctx, store: store, backend: newFakeBackend(), rt: &fakeRuntime{},
		director: &fakeDirector{compassID: "compass-1", token: compass.Token{Token: "one-time", ConnectorURL: "https://connector.example/graphql"}},
	}
	e.clusters = &fakeClusters{rt: e.rt}
	e.deps = operations.Deps{
		Runtimes: store.Runtimes(), Backends: fakeBackends{backendName: e.backend}, Clusters: e.clusters, Director: e.director,
		ConnectorURL: "https://default-connector.example/graphql", PollInterval: pollInterval,
	}
	return e
}

func testConfig(kyma bool) operations.RuntimeConfig {
	c := operations.RuntimeConfig{
		Description: "test runtime", Labels: map[string]any{"subaccount": "sub-1"}, SubAccountID: "sub-1",
		Cluster: infrastructure.ClusterConfig{
			Name: "c-test", KubernetesVersion: "1.31", Provider: "gcp", Region: "europe-west3", TargetSecret: "secret",
			MachineType: "n2-standard-4", WorkerCidr: "10.250.0.0/16", AutoScalerMin: 1, AutoScalerMax: 3, MaxSurge: 1,
		},
		Administrators: []string{"admin@example.com"},
	}
	if kyma {
		c.Kyma = &operations.Kyma{Version: "2.20.0", Profile: "Evaluation", Components: []operations.Component{
			{Name: "istio", Namespace: "istio-system"}, {Name: "serverless", Namespace: "kyma-system"},
		}}
	}
	return c
}

// insertRuntime stores a runtime with a provision operation (created at t0) and returns the
// operation's Data for a step test.
func (e *env) insertRuntime(id string, cfg operations.RuntimeConfig, secrets storage.Secrets) (storage.Runtime, storage.Operation) {
	e.t.Helper()
	data := operations.Data{RuntimeID: id, Tenant: tenant, Backend: backendName, Config: cfg}
	op, err := engine.NewOperation(operations.TypeProvision, id, data, 24*time.Hour, t0)
	require.NoError(e.t, err)
	rt, op, err := e.store.Runtimes().InsertRuntimeWithOperation(e.ctx,
		storage.Runtime{ID: id, Tenant: tenant, Name: "my-runtime", Backend: backendName, Secrets: secrets}, op)
	require.NoError(e.t, err)
	return rt, op
}

// stepOp is an operation as the engine would hand it to step at now.
func stepOp(step string, now time.Time, data operations.Data) operations.Op {
	op := operations.Op{Operation: storage.Operation{ID: "op-1", InstanceID: data.RuntimeID, Type: operations.TypeProvision}, Data: data}
	return op.ForStep(step, now)
}

func (e *env) runtime(id string) storage.Runtime {
	e.t.Helper()
	rt, err := e.store.Runtimes().GetRuntime(e.ctx, id)
	require.NoError(e.t, err)
	return rt
}

// confinedClusters is fakeClusters that also opens runtimes confined to a namespace
// (runtimeclient.ConfinedFactory), remembering the namespaces.
type confinedClusters struct {
	*fakeClusters
	installs   bool
	namespaces []string
}

func (f *confinedClusters) ForNamespace(kc, ns string) (runtimeclient.Runtime, error) {
	f.mu.Lock()
	f.namespaces = append(f.namespaces, ns)
	f.mu.Unlock()
	return f.ForKubeconfig(kc)
}

func (f *confinedClusters) InstallsModules() bool { return f.installs }
