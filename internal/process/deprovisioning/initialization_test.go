package deprovisioning

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deprovisionOp stores the deprovisioning operation itself, created at t0.
func deprovisionOp(t *testing.T, store storage.Store) Op {
	t.Helper()
	raw := insertOp(t, store, instance.TypeDeprovision, testInstanceID, t0, storage.StateInProgress)
	return Op{Operation: raw, Data: instance.DeprovisioningData{GlobalAccountID: testGA}}
}

func runInit(e *env, op Op) (Op, time.Duration, error) {
	return steptest.Run(context.Background(), Initialization{e.deps}, op, t0)
}

func TestInitialization_Name(t *testing.T) {
	assert.Equal(t, "Deprovision_Initialization", Initialization{}.Name())
}

func TestInitialization_ReadsRuntimeID(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	op := deprovisionOp(t, e.store)
	op.LastError = "waiting for provision operation x to finish"
	before := getInstance(t, e.store)

	out, wait, err := runInit(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
	assert.Equal(t, testGA, out.Data.GlobalAccountID)
	assert.Empty(t, out.LastError, "the wait is over")
	assert.Equal(t, "deprovisioning the runtime", out.Description)
	assert.Empty(t, e.prov.Calls(), "no provisioner call")
	assert.Equal(t, before.Version, getInstance(t, e.store).Version, "the instance is only read")
}

func TestInitialization_NoRuntime(t *testing.T) {
	e := newEnv(t)
	out, wait, err := runInit(e, deprovisionOp(t, e.store))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.Data.RuntimeID)
}

func TestInitialization_WaitsForOlderActiveOperation(t *testing.T) {
	for _, state := range []storage.OperationState{storage.StatePending, storage.StateInProgress} {
		t.Run(string(state), func(t *testing.T) {
			e := newEnv(t)
			setRuntimeID(t, e.store, "rt-1")
			older := insertOp(t, e.store, instance.TypeUpdate, testInstanceID, t0.Add(-time.Minute), state)
			op := deprovisionOp(t, e.store)

			out, wait, err := runInit(e, op)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Equal(t, "waiting for update operation "+older.ID+" to finish", out.LastError)
			assert.Empty(t, out.Data.RuntimeID, "the runtime is read only once the instance is free")
		})
	}
}

func TestInitialization_GoesOnOnceTheOlderOperationFinished(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	older := insertOp(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Minute), storage.StateInProgress)
	op := deprovisionOp(t, e.store)

	_, wait, err := runInit(e, op)
	require.NoError(t, err)
	require.Equal(t, testPoll, wait)

	older.State, older.DueAt = storage.StateSucceeded, nil
	_, err = e.store.Operations().UpdateOperation(context.Background(), older)
	require.NoError(t, err)

	out, wait, err := runInit(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
	assert.Empty(t, out.LastError)
}

func TestInitialization_DoesNotWaitFor(t *testing.T) {
	for name, other := range map[string]struct {
		opType, instanceID string
		createdAt          time.Time
		state              storage.OperationState
	}{
		"a newer active operation":                 {instance.TypeUpdate, testInstanceID, t0.Add(time.Minute), storage.StatePending},
		"a newer deprovisioning":                   {instance.TypeDeprovision, testInstanceID, t0.Add(time.Second), storage.StateInProgress},
		"an older finished operation":              {instance.TypeProvision, testInstanceID, t0.Add(-time.Hour), storage.StateSucceeded},
		"an older failed operation":                {instance.TypeUpdate, testInstanceID, t0.Add(-time.Hour), storage.StateFailed},
		"an older active operation of another one": {instance.TypeProvision, "inst-other", t0.Add(-time.Hour), storage.StateInProgress},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			setRuntimeID(t, e.store, "rt-1")
			insertOp(t, e.store, other.opType, other.instanceID, other.createdAt, other.state)
			op := deprovisionOp(t, e.store)

			out, wait, err := runInit(e, op)
			require.NoError(t, err)
			assert.Zero(t, wait)
			assert.Empty(t, out.LastError)
			assert.Equal(t, "rt-1", out.Data.RuntimeID)
		})
	}
}

type failingOperations struct{ storage.Operations }

func (failingOperations) ListOperations(context.Context, storage.OperationFilter) (storage.Page[storage.Operation], error) {
	return storage.Page[storage.Operation]{}, errors.New("database is down")
}

func TestInitialization_StorageErrorsPoll(t *testing.T) {
	t.Run("listing operations", func(t *testing.T) {
		e := newEnv(t)
		op := deprovisionOp(t, e.store)
		e.deps.Operations = failingOperations{e.store.Operations()}
		out, wait, err := runInit(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Equal(t, "listing the instance's operations: database is down", out.LastError)
	})
	t.Run("reading the instance", func(t *testing.T) {
		e := newEnv(t)
		op := deprovisionOp(t, e.store)
		op.InstanceID = "inst-missing"
		out, wait, err := runInit(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "reading the instance")
		assert.Empty(t, out.Data.RuntimeID)
	})
}

// What provisioning left in external systems, as the steps record it.
var (
	provisionedResources = instance.Resources{
		AVSInternalEvaluationID: 100001, AVSExternalEvaluationID: 100002, AVSTagged: true,
		IASServiceProviderID: "sp-1", IASClientID: "client-1", IASOIDCConfigured: true,
		EDPSubAccountID:       testSA,
		EventHubResourceGroup: "kyma-eventhubs-1", EventHubNamespace: "kyma1",
		ReconcilerClusterID: "rt-1",
	}
	// After a Kyma 2.x upgrade the Event Hubs are gone and EMS is there.
	upgradedResources = instance.Resources{
		AVSInternalEvaluationID: 100001, AVSExternalEvaluationID: 100002, AVSTagged: true,
		IASServiceProviderID: "sp-1", IASClientID: "client-1", IASOIDCConfigured: true,
		EDPSubAccountID: testSA,
		EMSInstanceID:   "ems-1", EMSBindingID: "ems-binding-1",
		ReconcilerClusterID: "rt-1",
	}
)

func upgradedKyma(t *testing.T, store storage.Store, createdAt time.Time, state storage.OperationState, res instance.Resources) storage.Operation {
	t.Helper()
	return insertOpData(t, store, instance.TypeUpgradeKyma, testInstanceID, createdAt, state,
		instance.UpgradeKymaData{KymaVersion: "2.1.0", Initialized: true, RuntimeID: "rt-1", Resources: res}, nil)
}

func TestInitialization_ReadsWhatTheProvisioningCreated(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	provisioned(t, e.store, provisionedResources)

	out, wait, err := runInit(e, deprovisionOp(t, e.store))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.True(t, out.Data.Initialized)
	assert.Equal(t, provisionedResources, out.Data.Resources)
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
}

// A provisioning that failed half-way created some resources: they are removed too.
func TestInitialization_ReadsWhatAFailedProvisioningCreated(t *testing.T) {
	e := newEnv(t)
	partial := instance.Resources{AVSInternalEvaluationID: 100001, IASServiceProviderID: "sp-1", IASClientID: "client-1"}
	insertOpData(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Hour), storage.StateFailed,
		instance.ProvisioningData{Resources: partial}, nil)

	out, wait, err := runInit(e, deprovisionOp(t, e.store))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, partial, out.Data.Resources)
}

func TestInitialization_NewestOfProvisioningAndKymaUpgrade(t *testing.T) {
	t.Run("upgraded after provisioning", func(t *testing.T) {
		e := newEnv(t)
		provisioned(t, e.store, provisionedResources) // t0-1h
		upgradedKyma(t, e.store, t0.Add(-time.Minute), storage.StateSucceeded, upgradedResources)

		out, _, err := runInit(e, deprovisionOp(t, e.store))
		require.NoError(t, err)
		assert.Equal(t, upgradedResources, out.Data.Resources)
	})
	t.Run("a failed upgrade's resources", func(t *testing.T) {
		e := newEnv(t)
		provisioned(t, e.store, provisionedResources)
		// The upgrade created EMS, then failed before it removed the Event Hubs.
		res := provisionedResources
		res.EMSInstanceID = "ems-1"
		upgradedKyma(t, e.store, t0.Add(-time.Minute), storage.StateFailed, res)

		out, _, err := runInit(e, deprovisionOp(t, e.store))
		require.NoError(t, err)
		assert.Equal(t, res, out.Data.Resources)
	})
	t.Run("skips an upgrade that failed before it read the resources", func(t *testing.T) {
		e := newEnv(t)
		provisioned(t, e.store, provisionedResources)
		insertOpData(t, e.store, instance.TypeUpgradeKyma, testInstanceID, t0.Add(-time.Minute), storage.StateFailed,
			instance.UpgradeKymaData{KymaVersion: "2.1.0"}, nil)

		out, _, err := runInit(e, deprovisionOp(t, e.store))
		require.NoError(t, err)
		assert.Equal(t, provisionedResources, out.Data.Resources)
	})
	t.Run("provisioned (resumed) after an upgrade", func(t *testing.T) {
		e := newEnv(t)
		upgradedKyma(t, e.store, t0.Add(-2*time.Hour), storage.StateSucceeded, upgradedResources)
		provisioned(t, e.store, provisionedResources) // t0-1h

		out, _, err := runInit(e, deprovisionOp(t, e.store))
		require.NoError(t, err)
		assert.Equal(t, provisionedResources, out.Data.Resources)
	})
}

func TestInitialization_OnlyTheInstancesProvisioningCounts(t *testing.T) {
	e := newEnv(t)
	provisioned(t, e.store, provisionedResources)
	// Newer, finished operations that are not a provisioning or a Kyma upgrade of this instance.
	insertOpData(t, e.store, instance.TypeProvision, "inst-other", t0.Add(-time.Minute), storage.StateSucceeded,
		instance.ProvisioningData{Resources: instance.Resources{AVSInternalEvaluationID: 999}}, nil)
	insertOpData(t, e.store, instance.TypeSuspension, testInstanceID, t0.Add(-30*time.Minute), storage.StateSucceeded,
		instance.DeprovisioningData{Initialized: true, Resources: instance.Resources{EDPSubAccountID: "other"}}, nil)
	insertOpData(t, e.store, instance.TypeUpdate, testInstanceID, t0.Add(-20*time.Minute), storage.StateSucceeded,
		instance.UpdateData{GlobalAccountID: testGA, RuntimeID: "rt-1"}, nil)
	insertOp(t, e.store, instance.TypeUpgradeCluster, testInstanceID, t0.Add(-10*time.Minute), storage.StateSucceeded)

	out, _, err := runInit(e, deprovisionOp(t, e.store))
	require.NoError(t, err)
	assert.Equal(t, provisionedResources, out.Data.Resources)
}

func TestInitialization_NeverProvisioned(t *testing.T) {
	e := newEnv(t)
	out, wait, err := runInit(e, deprovisionOp(t, e.store))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.True(t, out.Data.Initialized)
	assert.Equal(t, instance.Resources{}, out.Data.Resources, "nothing to clean up")
}

// Deprovisioning requested while the provisioning runs: it waits, then removes what the
// provisioning created by the time it finished.
func TestInitialization_ReadsTheResourcesOfTheProvisioningItWaitedFor(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	running := insertOpData(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Minute), storage.StateInProgress,
		instance.ProvisioningData{Resources: instance.Resources{AVSInternalEvaluationID: 100001}}, nil)
	op := deprovisionOp(t, e.store)

	out, wait, err := runInit(e, op)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.False(t, out.Data.Initialized)
	assert.Empty(t, out.Data.Resources)

	// The provisioning created the rest, then failed.
	data, err := json.Marshal(instance.ProvisioningData{RuntimeID: "rt-1", Resources: provisionedResources})
	require.NoError(t, err)
	running.Data, running.State, running.DueAt = data, storage.StateFailed, nil
	_, err = e.store.Operations().UpdateOperation(context.Background(), running)
	require.NoError(t, err)

	out, wait, err = runInit(e, out)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, provisionedResources, out.Data.Resources)
}

// Once read, the resources are the operation's: the steps clear what they removed, and a rerun
// does not bring it back.
func TestInitialization_ReadsTheResourcesOnce(t *testing.T) {
	e := newEnv(t)
	provisioned(t, e.store, provisionedResources)
	op := deprovisionOp(t, e.store)
	op.Data.Initialized = true
	op.Data.Resources = instance.Resources{ReconcilerClusterID: "rt-1"} // the rest was removed already

	out, wait, err := runInit(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, instance.Resources{ReconcilerClusterID: "rt-1"}, out.Data.Resources)
}

// The provisioning's overrides hold credentials (in its encrypted secrets): deprovisioning needs
// none of them, and they never reach its data.
func TestInitialization_TakesNoSecrets(t *testing.T) {
	e := newEnv(t)
	const secret = "Endpoint=sb://kyma1.servicebus.windows.net/;SharedAccessKey=s3cr3t"
	var o overrides.Overrides
	var secrets storage.Secrets
	o.Set(&secrets, "knative-eventing-kafka", overrides.Entry{Key: "kafka.password", Value: secret, Secret: true})
	insertOpData(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Hour), storage.StateSucceeded,
		instance.ProvisioningData{Overrides: o, Resources: provisionedResources}, secrets)

	out, _, err := runInit(e, deprovisionOp(t, e.store))
	require.NoError(t, err)
	assert.Equal(t, provisionedResources, out.Data.Resources)
	assert.Empty(t, out.Secrets)
	data, err := json.Marshal(out.Data)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "s3cr3t")
}

// provisioningFailing fails listing the instance's provisioning operations, the active-operation
// check passing.
type provisioningFailing struct{ storage.Operations }

func (f provisioningFailing) ListOperations(ctx context.Context, filter storage.OperationFilter) (storage.Page[storage.Operation], error) {
	if slices.Contains(filter.Types, instance.TypeProvision) {
		return storage.Page[storage.Operation]{}, errors.New("database is down")
	}
	return f.Operations.ListOperations(ctx, filter)
}

func TestInitialization_ProvisioningUnreadablePolls(t *testing.T) {
	t.Run("storage error", func(t *testing.T) {
		e := newEnv(t)
		provisioned(t, e.store, provisionedResources)
		op := deprovisionOp(t, e.store)
		e.deps.Operations = provisioningFailing{e.store.Operations()}

		out, wait, err := runInit(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Equal(t, "reading the instance's provisioning: database is down", out.LastError)
		assert.False(t, out.Data.Initialized, "read again on the next run")

		e.deps.Operations = e.store.Operations()
		out, wait, err = runInit(e, out)
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, out.LastError)
		assert.Equal(t, provisionedResources, out.Data.Resources)
	})
	t.Run("undecodable data", func(t *testing.T) {
		e := newEnv(t)
		prov := insertOpData(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Hour), storage.StateSucceeded,
			map[string]any{"resources": "not an object"}, nil)

		out, wait, err := runInit(e, deprovisionOp(t, e.store))
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "decoding provision operation "+prov.ID)
		assert.False(t, out.Data.Initialized)
	})
}
