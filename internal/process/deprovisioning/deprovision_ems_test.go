package deprovisioning

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/servicemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const emsStep = "Deprovision EMS"

var emsCleanup = cleanupStep{
	step:    func(d Deps) engine.Step[instance.DeprovisioningData] { return DeprovisionEMS{d} },
	sandbox: "servicemanager", system: "Service Manager (EMS)",
	create: func(t *testing.T, e *env) instance.Resources { return createEMS(t, e, "kyma-ems-prov-1", true) },
	cleared: func(r instance.Resources) instance.Resources {
		r.EMSInstanceID, r.EMSBindingID = "", ""
		return r
	},
	remaining: func(t *testing.T, e *env) int {
		objs := objects[smstandin.Objects](t, e, "servicemanager")
		return len(objs.Instances) + len(objs.Bindings)
	},
	deletions: func(t *testing.T, e *env) int {
		objs := objects[smstandin.Objects](t, e, "servicemanager")
		return sum(objs.InstanceDeletesByName) + sum(objs.BindingDeletesByName)
	},
	wrongCredentials: func(c *standins.Credentials) { c.SMClientSecret = "rotated" },
}

// createEMS provisions an Enterprise Messaging instance in the sandbox, and binds it when bind,
// as provisioning does.
func createEMS(t *testing.T, e *env, name string, bind bool) instance.Resources {
	t.Helper()
	sm := e.sys.Systems.ServiceManager
	creds, ok := sm.DefaultCredentials()
	require.True(t, ok)
	in, err := sm.ProvisionInstance(testCtx(t), creds, servicemanager.InstanceRequest{
		Name: name, OfferingName: smstandin.OfferingEnterpriseMessaging, PlanName: smstandin.PlanDefault,
		Labels: map[string][]string{"instance_id": {testInstanceID}},
	})
	require.NoError(t, err)
	res := instance.Resources{EMSInstanceID: in.ID}
	if bind {
		b, err := sm.Bind(testCtx(t), creds, servicemanager.BindingRequest{Name: name, InstanceID: in.ID})
		require.NoError(t, err)
		res.EMSBindingID = b.ID
	}
	return res
}

func TestDeprovisionEMS_Name(t *testing.T) {
	assert.Equal(t, emsStep, DeprovisionEMS{}.Name())
}

func TestDeprovisionEMS(t *testing.T) { testCleanupStep(t, emsCleanup) }

func TestDeprovisionEMS_UnbindsThenDeprovisions(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createEMS(t, e, "kyma-ems-prov-1", true)
	other := createEMS(t, e, "kyma-ems-other", true)

	out, wait, err := runStep(e, DeprovisionEMS{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.EMSInstanceID)
	assert.Empty(t, out.Data.Resources.EMSBindingID)
	objs := objects[smstandin.Objects](t, e, "servicemanager")
	require.Len(t, objs.Instances, 1)
	assert.Equal(t, other.EMSInstanceID, objs.Instances[0].ID, "another runtime's instance stays")
	require.Len(t, objs.Bindings, 1)
	assert.Equal(t, other.EMSBindingID, objs.Bindings[0].ID)
	assert.Equal(t, map[string]int{"kyma-ems-prov-1": 1}, objs.InstanceDeletesByName)
	assert.Equal(t, map[string]int{"kyma-ems-prov-1": 1}, objs.BindingDeletesByName)
}

func TestDeprovisionEMS_UnrecordedBindingGoesWithTheInstance(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createEMS(t, e, "kyma-ems-prov-1", true)
	res.EMSBindingID = "" // provisioning stopped before it recorded the binding

	out, wait, err := runStep(e, DeprovisionEMS{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	objs := objects[smstandin.Objects](t, e, "servicemanager")
	assert.Empty(t, objs.Instances)
	assert.Empty(t, objs.Bindings, "the Service Manager refuses to delete an instance with bindings")
}

// An instance whose creation still runs cannot be deleted yet: the step retries, and once the
// Service Manager accepted the (asynchronous) deletion the step is done.
func TestDeprovisionEMS_InstanceStillBeingCreated(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{SMProvisionDelay: time.Minute})
	res := createEMS(t, e, "kyma-ems-prov-1", false)
	e.callTimeout = downCallTimeout

	out, wait, err := runStep(e, DeprovisionEMS{e.deps}, withResources(res), t0)
	assertRetrying(t, out, wait, err, "Service Manager (EMS)")
	assert.Contains(t, out.LastError, "deprovisioning the EMS instance")
	assert.Contains(t, out.LastError, "create operation is still in progress")
	assert.Equal(t, res, out.Data.Resources)

	e.clock.Advance(time.Minute)
	out, wait, err = runStep(e, DeprovisionEMS{e.deps}, out, t0.Add(time.Minute))
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.EMSInstanceID)
	objs := objects[smstandin.Objects](t, e, "servicemanager")
	require.Len(t, objs.Instances, 1, "the deletion was accepted and runs")
	require.NotNil(t, objs.Instances[0].LastOperation)
	assert.Equal(t, smstandin.OperationDelete, objs.Instances[0].LastOperation.Type)

	e.clock.Advance(time.Minute)
	objs = objects[smstandin.Objects](t, e, "servicemanager")
	assert.Empty(t, objs.Instances)
	assert.Equal(t, map[string]int{"kyma-ems-prov-1": 1}, objs.InstanceDeletesByName)
}

func TestDeprovisionEMS_NoServiceManagerCredentials(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createEMS(t, e, "kyma-ems-prov-1", true)
	unconfigured, err := servicemanager.New(servicemanager.Config{})
	require.NoError(t, err)
	e.deps.Systems.ServiceManager = unconfigured

	// a configuration that waiting will not change: recorded at once
	out, wait, err := runStep(e, DeprovisionEMS{e.deps}, withResources(res), t0)
	assertGaveUp(t, out, wait, err, emsStep, "Service Manager (EMS)")
	assert.Contains(t, out.LastError, "no Service Manager credentials configured")
	assert.Equal(t, res, out.Data.Resources)
	assert.Len(t, objects[smstandin.Objects](t, e, "servicemanager").Instances, 1)
}
