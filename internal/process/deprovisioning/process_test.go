package deprovisioning

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var wantStages = map[string][]string{
	"weight_1":  {"Deprovision_Initialization"},
	"weight_2":  {"Deprovision Azure Event Hubs", "Deprovision EMS", "De-provision_AVS_Evaluations", "IAS_Deregistration", "EDP_Deregistration"},
	"weight_5":  {"Deregister_Cluster"},
	"weight_10": {"Remove_Runtime"},
}

func TestProcess_Definition(t *testing.T) {
	p, err := Process(Deps{}, time.Hour, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeDeprovision, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, wantStages, p.Stages())

	s, err := SuspensionProcess(Deps{}, time.Hour, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeSuspension, s.Type())
	assert.Equal(t, p.Stages(), s.Stages(), "a suspension runs the same steps")
}

// engineEnv runs processes of opType on the engine with e's store and clock.
type engineEnv struct {
	*env
	eng *engine.Engine
}

func newEngine(t *testing.T, e *env, opType string, callTimeout time.Duration) *engineEnv {
	t.Helper()
	if e.clock == nil {
		e.clock = systemstest.NewClock(t0)
	}
	def := Process
	if opType == instance.TypeSuspension {
		def = SuspensionProcess
	}
	p, err := def(e.deps, time.Hour, callTimeout)
	require.NoError(t, err)
	return &engineEnv{env: e, eng: steptest.Engine(t, e.store, e.clock, p)}
}

// start stores a new operation of opType for the instance, created now.
func (x *engineEnv) start(t *testing.T, opType string) storage.Operation {
	t.Helper()
	return steptest.StartOperation(t, x.store, opType, testInstanceID, instance.DeprovisioningData{GlobalAccountID: testGA}, x.clock.Now())
}

// runRounds runs what is due, then moves the clock by step, rounds times or until op finished.
func (x *engineEnv) runRounds(t *testing.T, id string, rounds int, step time.Duration) storage.Operation {
	t.Helper()
	return steptest.RunRounds(t, x.eng, x.store, x.clock, id, rounds, step)
}

// trace is the operation's events as step:type.
func (x *engineEnv) trace(t *testing.T, id string) []string {
	t.Helper()
	return steptest.Trace(t, x.store, id)
}

func provisionerDone(e *env) {
	e.prov.deprovision = deprovisionAccepted("pop-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
}

// TestProcess_SystemsDisabled runs the process on the engine with every external system disabled:
// their steps are skipped, the initialization waits for an older provisioning, then the runtime
// is removed and the instance archived.
func TestProcess_SystemsDisabled(t *testing.T) {
	e := newEnv(t)
	setRuntimeID(t, e.store, "rt-1")
	provisionerDone(e)
	x := newEngine(t, e, instance.TypeDeprovision, time.Minute)
	ctx := context.Background()

	// An older provisioning still runs (its type is not registered here, so it stays active).
	prov := insertOp(t, e.store, instance.TypeProvision, testInstanceID, t0.Add(-time.Minute), storage.StateInProgress)
	raw := x.start(t, instance.TypeDeprovision)

	op := x.runRounds(t, raw.ID, 1, 0)
	assert.Equal(t, "weight_1", op.Stage)
	assert.Equal(t, "waiting for provision operation "+prov.ID+" to finish", op.LastError)
	assert.Empty(t, e.prov.Calls())

	prov.State, prov.DueAt = storage.StateSucceeded, nil
	_, err := e.store.Operations().UpdateOperation(ctx, prov)
	require.NoError(t, err)

	e.clock.Advance(testPoll)
	op = x.runRounds(t, raw.ID, 5, testPoll)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"weight_1", "weight_2", "weight_5", "weight_10"}, op.Progress.FinishedStages)
	assert.Empty(t, op.Progress.ExecutedButNotCompleted)

	assert.Equal(t, []string{
		"Deprovision_Initialization:retrying",
		"Deprovision_Initialization:succeeded",
		"Deprovision Azure Event Hubs:skipped", "Deprovision EMS:skipped", "De-provision_AVS_Evaluations:skipped",
		"IAS_Deregistration:skipped", "EDP_Deregistration:skipped", "Deregister_Cluster:skipped",
		"Remove_Runtime:retrying",
		"Remove_Runtime:succeeded",
	}, x.trace(t, raw.ID))
	assert.Equal(t, []provCall{
		{Method: "DeprovisionRuntime", Tenant: testGA, ID: "rt-1"},
		{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"},
	}, e.prov.Calls())
	assert.NotNil(t, getInstance(t, e.store).DeletedAt)
}

// createEverything creates in the sandbox what a Kyma 1.x provisioning on Azure, upgraded to
// Kyma 2.x, has: evaluations, a service provider, an EDP registration, Event Hubs, EMS and the
// reconciler's cluster.
func createEverything(t *testing.T, e *env) instance.Resources {
	t.Helper()
	res := createEvaluations(t, e)
	ias := createServiceProvider(t, e)
	res.IASServiceProviderID, res.IASClientID, res.IASOIDCConfigured = ias.IASServiceProviderID, ias.IASClientID, ias.IASOIDCConfigured
	res.EDPSubAccountID = registerInEDP(t, e, testSA).EDPSubAccountID
	eh := eventHubsCleanup.create(t, e)
	res.EventHubResourceGroup, res.EventHubNamespace = eh.EventHubResourceGroup, eh.EventHubNamespace
	ems := createEMS(t, e, "kyma-ems-prov-1", true)
	res.EMSInstanceID, res.EMSBindingID = ems.EMSInstanceID, ems.EMSBindingID
	res.ReconcilerClusterID = registerCluster(t, e, "rt-1").ReconcilerClusterID
	return res
}

// assertNothingLeft checks that the sandbox holds none of the runtime's objects any more.
func assertNothingLeft(t *testing.T, e *env) {
	t.Helper()
	assert.Empty(t, evaluationIDs(t, e), "AVS")
	assert.Empty(t, objects[iasstandin.Objects](t, e, "ias").ServiceProviders, "IAS")
	assert.Empty(t, objects[edpstandin.Objects](t, e, "edp").DataTenants, "EDP")
	assert.Empty(t, objects[azurestandin.Objects](t, e, "azure").ResourceGroups, "Azure")
	sm := objects[smstandin.Objects](t, e, "servicemanager")
	assert.Empty(t, sm.Instances, "Service Manager")
	assert.Empty(t, sm.Bindings, "Service Manager")
	assert.Empty(t, clusters(t, e, func(s string) bool { return s != reconciler.StatusDeleted }), "Reconciler")
}

// TestProcess_RemovesWhatProvisioningCreated runs deprovisioning and suspension on the engine
// against the sandbox: every object the instance's provisioning recorded is removed.
func TestProcess_RemovesWhatProvisioningCreated(t *testing.T) {
	for _, opType := range []string{instance.TypeDeprovision, instance.TypeSuspension} {
		t.Run(opType, func(t *testing.T) {
			e := newSystemsEnv(t, standins.Options{})
			setRuntimeID(t, e.store, "rt-1")
			provisioned(t, e.store, createEverything(t, e))
			provisionerDone(e)
			x := newEngine(t, e, opType, 10*time.Second)
			raw := x.start(t, opType)

			op := x.runRounds(t, raw.ID, 5, testPoll)
			require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
			assert.Empty(t, op.Progress.ExecutedButNotCompleted)
			assertNothingLeft(t, e)

			var data instance.DeprovisioningData
			require.NoError(t, json.Unmarshal(op.Data, &data))
			assert.Equal(t, instance.Resources{AVSTagged: true, IASOIDCConfigured: true}, data.Resources, "every removed object cleared")

			assert.Equal(t, []string{
				"Deprovision_Initialization:succeeded",
				"Deprovision Azure Event Hubs:succeeded",
				"Deprovision EMS:succeeded",
				"De-provision_AVS_Evaluations:succeeded",
				"IAS_Deregistration:succeeded",
				"EDP_Deregistration:succeeded",
				"Deregister_Cluster:retrying",
				"Deregister_Cluster:succeeded",
				"Remove_Runtime:retrying",
				"Remove_Runtime:succeeded",
			}, x.trace(t, raw.ID))

			inst := getInstance(t, e.store)
			if opType == instance.TypeSuspension {
				assert.Nil(t, inst.DeletedAt, "a suspended instance stays")
				assert.Empty(t, inst.RuntimeID)
			} else {
				assert.NotNil(t, inst.DeletedAt)
			}
		})
	}
}

// TestProcess_SystemDownDoesNotBlock: AVS is down for good; its step gives up after the cleanup
// window, recorded as executed but not completed, and the rest of the deprovisioning goes on.
func TestProcess_SystemDownDoesNotBlock(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	setRuntimeID(t, e.store, "rt-1")
	res := createEverything(t, e)
	provisioned(t, e.store, res)
	provisionerDone(e)
	e.sys.Down(t, "avs")
	x := newEngine(t, e, instance.TypeDeprovision, 300*time.Millisecond)
	raw := x.start(t, instance.TypeDeprovision)

	op := x.runRounds(t, raw.ID, 1, 0)
	require.Equal(t, storage.StateInProgress, op.State)
	assert.Equal(t, "weight_2", op.Stage)
	assert.Contains(t, op.LastError, "AVS: deleting evaluations")

	e.clock.Advance(e.deps.Systems.CleanupRetryTime)
	op = x.runRounds(t, raw.ID, 5, testPoll)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"De-provision_AVS_Evaluations"}, op.Progress.ExecutedButNotCompleted)
	assert.Len(t, evaluationIDs(t, e), 2, "left behind")
	assert.Empty(t, objects[iasstandin.Objects](t, e, "ias").ServiceProviders, "the other systems are cleaned up")
	assert.Empty(t, objects[edpstandin.Objects](t, e, "edp").DataTenants)
	assert.NotNil(t, getInstance(t, e.store).DeletedAt)

	var data instance.DeprovisioningData
	require.NoError(t, json.Unmarshal(op.Data, &data))
	assert.Equal(t, res.AVSInternalEvaluationID, data.Resources.AVSInternalEvaluationID, "the leftovers stay on record")
	assert.Equal(t, res.AVSExternalEvaluationID, data.Resources.AVSExternalEvaluationID)
}
