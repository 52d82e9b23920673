package deprovisioning

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

const (
	testInstanceID = "inst-1"
	testGA         = "ga-1"
	testSA         = "sa-1"
	testPoll       = 7 * time.Second
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// provCall is one call the steps made to the provisioner.
type provCall struct {
	Method    string
	Tenant    string
	ID        string // runtime ID or operation ID, depending on the method
	Provision *gqlschema.ProvisionRuntimeInput
}

// fakeProvisioner is a hand-written client.Client: each method the steps use is answered by
// the matching func (nil: "not implemented"); every call is recorded.
type fakeProvisioner struct {
	mu          sync.Mutex
	calls       []provCall
	deprovision func(tenant, runtimeID string) (string, error)
	status      func(tenant, opID string) (*gqlschema.OperationStatus, error)
}

var _ client.Client = (*fakeProvisioner)(nil)

var errNotImplemented = errors.New("fake: not implemented")

func (f *fakeProvisioner) record(c provCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeProvisioner) Calls() []provCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]provCall(nil), f.calls...)
}

func (f *fakeProvisioner) ProvisionRuntime(_ context.Context, tenant string, in gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	f.record(provCall{Method: "ProvisionRuntime", Tenant: tenant, Provision: &in})
	return nil, errNotImplemented
}

func (f *fakeProvisioner) DeprovisionRuntime(_ context.Context, tenant, runtimeID string) (string, error) {
	f.record(provCall{Method: "DeprovisionRuntime", Tenant: tenant, ID: runtimeID})
	if f.deprovision == nil {
		return "", errNotImplemented
	}
	return f.deprovision(tenant, runtimeID)
}

func (f *fakeProvisioner) UpgradeRuntime(_ context.Context, tenant, runtimeID string, _ gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
	f.record(provCall{Method: "UpgradeRuntime", Tenant: tenant, ID: runtimeID})
	return nil, errNotImplemented
}

func (f *fakeProvisioner) UpgradeShoot(_ context.Context, tenant, runtimeID string, _ gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	f.record(provCall{Method: "UpgradeShoot", Tenant: tenant, ID: runtimeID})
	return nil, errNotImplemented
}

func (f *fakeProvisioner) HibernateRuntime(_ context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error) {
	f.record(provCall{Method: "HibernateRuntime", Tenant: tenant, ID: runtimeID})
	return nil, errNotImplemented
}

func (f *fakeProvisioner) ReconnectRuntimeAgent(_ context.Context, tenant, runtimeID string) (string, error) {
	f.record(provCall{Method: "ReconnectRuntimeAgent", Tenant: tenant, ID: runtimeID})
	return "", errNotImplemented
}

func (f *fakeProvisioner) RuntimeStatus(_ context.Context, tenant, runtimeID string) (*gqlschema.RuntimeStatus, error) {
	f.record(provCall{Method: "RuntimeStatus", Tenant: tenant, ID: runtimeID})
	return nil, errNotImplemented
}

func (f *fakeProvisioner) RuntimeOperationStatus(_ context.Context, tenant, opID string) (*gqlschema.OperationStatus, error) {
	f.record(provCall{Method: "RuntimeOperationStatus", Tenant: tenant, ID: opID})
	if f.status == nil {
		return nil, errNotImplemented
	}
	return f.status(tenant, opID)
}

func strp(s string) *string { return &s }

func opStatus(id string, state gqlschema.OperationState) *gqlschema.OperationStatus {
	return &gqlschema.OperationStatus{ID: strp(id), Operation: gqlschema.OperationTypeDeprovision, State: state}
}

func testLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// newStore opens a real SQLite store in the test's temp dir.
func newStore(t *testing.T) storage.Store {
	t.Helper()
	cfg := driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}
	store, err := driver.Open(context.Background(), cfg, testLog())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// seedInstance stores the instance the operation belongs to.
func seedInstance(t *testing.T, store storage.Store) storage.Instance {
	t.Helper()
	inst, err := store.Instances().InsertInstance(context.Background(), storage.Instance{
		InstanceID: testInstanceID, GlobalAccountID: testGA, SubAccountID: testSA,
		ServiceID: "svc", PlanID: "plan-azure", ProviderRegion: "westeurope", Parameters: []byte(`{"name":"c1"}`),
	})
	require.NoError(t, err)
	return inst
}

func getInstance(t *testing.T, store storage.Store) storage.Instance {
	t.Helper()
	inst, err := store.Instances().GetInstance(context.Background(), testInstanceID)
	require.NoError(t, err)
	return inst
}

type env struct {
	store storage.Store
	prov  *fakeProvisioner
	deps  Deps
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store := newStore(t)
	seedInstance(t, store)
	prov := &fakeProvisioner{}
	return &env{store: store, prov: prov, deps: Deps{Instances: store.Instances(), Operations: store.Operations(), Provisioner: prov, PollInterval: testPoll}}
}

// setRuntimeID gives the stored instance a runtime, as provisioning did.
func setRuntimeID(t *testing.T, store storage.Store, runtimeID string) {
	t.Helper()
	_, err := storage.ModifyInstance(context.Background(), store.Instances(), testInstanceID, func(i *storage.Instance) { i.RuntimeID = runtimeID })
	require.NoError(t, err)
}

func newOp(data instance.DeprovisioningData) Op {
	return Op{Operation: storage.Operation{ID: "op-1", InstanceID: testInstanceID, Type: instance.TypeDeprovision, State: storage.StateInProgress, CreatedAt: t0}, Data: data}
}

// failingInstances fails UpdateInstance the first fails times (a database error).
type failingInstances struct {
	storage.Instances
	mu    sync.Mutex
	fails int
}

func (f *failingInstances) UpdateInstance(ctx context.Context, inst storage.Instance) (storage.Instance, error) {
	f.mu.Lock()
	if f.fails > 0 {
		f.fails--
		f.mu.Unlock()
		return storage.Instance{}, errors.New("database is down")
	}
	f.mu.Unlock()
	return f.Instances.UpdateInstance(ctx, inst)
}
