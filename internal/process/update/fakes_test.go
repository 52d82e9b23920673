package update

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/clienttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
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

// fakeProvisioner is the shared clienttest.Fake, answering UpgradeShoot with upgradeShoot and
// RuntimeOperationStatus with status (nil: not implemented), as they are when the steps call.
type fakeProvisioner struct {
	*clienttest.Fake
	upgradeShoot func(tenant, runtimeID string, in gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error)
	status       func(tenant, opID string) (*gqlschema.OperationStatus, error)
}

func newFakeProvisioner() *fakeProvisioner {
	f := &fakeProvisioner{Fake: &clienttest.Fake{}}
	f.BindUpgradeShoot(&f.upgradeShoot)
	f.BindRuntimeOperationStatus(&f.status)
	return f
}

func strp(s string) *string { return &s }

func opStatus(id string, state gqlschema.OperationState) *gqlschema.OperationStatus {
	st := clienttest.Status(id, "", state)
	st.Operation = gqlschema.OperationTypeUpgradeShoot
	return st
}

// getInstance reads the instance the operation belongs to.
func getInstance(t *testing.T, store storage.Store) storage.Instance {
	t.Helper()
	return steptest.GetInstance(t, store, testInstanceID)
}

type env struct {
	store storage.Store
	prov  *fakeProvisioner
	deps  Deps
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store := steptest.OpenStore(t, steptest.IDs{Instance: testInstanceID, Runtime: "rt-1", GlobalAccount: testGA, SubAccount: testSA})
	prov := newFakeProvisioner()
	return &env{store: store, prov: prov, deps: Deps{Instances: store.Instances(), Provisioner: prov, PollInterval: testPoll}}
}

// updateData is the payload the update handler would store: the full, merged parameters.
func updateData() instance.UpdateData {
	return instance.UpdateData{
		GlobalAccountID: testGA, RuntimeID: "rt-1", PlanID: "plan-aws",
		Parameters: instance.Parameters{Name: "c1", Region: "eu-central-1", MachineType: "m6i.xlarge", AutoScalerMin: 4, AutoScalerMax: 8,
			Administrators: []string{"admin@example.com", "ops@example.com"}},
	}
}

func newOp(data instance.UpdateData) Op {
	return Op{Operation: storage.Operation{ID: "op-1", InstanceID: testInstanceID, Type: instance.TypeUpdate, State: storage.StateInProgress, CreatedAt: t0}, Data: data}
}
