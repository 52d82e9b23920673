package deprovisioning

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/clienttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
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

func strp(s string) *string { return &s }

func opStatus(id string, state gqlschema.OperationState) *gqlschema.OperationStatus {
	st := clienttest.Status(id, "", state)
	st.Operation = gqlschema.OperationTypeDeprovision
	return st
}

func testLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
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
	store := storagetest.OpenSQLite(t)
	seedInstance(t, store)
	prov := newFakeProvisioner()
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
