package provisioning_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func emsStep(e *env) step { return provisioning.ProvisionEMS{Deps: e.deps} }

const (
	smProvisionDelay = time.Minute
	emsSystem        = "Service Manager (EMS)"
)

func TestProvisionEMS_Name(t *testing.T) {
	assert.Equal(t, "Provision EMS", provisioning.ProvisionEMS{}.Name())
	assert.Equal(t, "kyma-ems-"+testOpID, provisioning.EMSName(testOpID))
}

func TestProvisionEMS_WaitsForTheInstanceThenBindsIt(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{SMProvisionDelay: smProvisionDelay})
	name := provisioning.EMSName(testOpID)

	out, wait, err := e.run(emsStep(e), newOp(provData("azure", "westeurope")), t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait, "the instance is being created")
	assert.Equal(t, "waiting for the Enterprise Messaging instance to be ready", out.LastError)
	require.NotEmpty(t, out.Data.Resources.EMSInstanceID, "stored at once, so deprovisioning finds it")
	assert.Empty(t, out.Data.Resources.EMSBindingID)
	assert.Empty(t, out.Data.Overrides)

	e.clock.Advance(smProvisionDelay + time.Second)
	out = e.mustRun(t, emsStep(e), out, e.clock.Now())
	assert.Empty(t, out.LastError)

	objs := objects[smstandin.Objects](t, e, "servicemanager")
	require.Len(t, objs.Instances, 1)
	inst := objs.Instances[0]
	assert.Equal(t, out.Data.Resources.EMSInstanceID, inst.ID)
	assert.Equal(t, name, inst.Name)
	assert.True(t, inst.Ready)
	assert.Equal(t, []string{testInstanceID}, inst.Labels["instance_id"])
	require.Len(t, objs.Bindings, 1)
	b := objs.Bindings[0]
	assert.Equal(t, out.Data.Resources.EMSBindingID, b.ID)
	assert.Equal(t, name, b.Name)
	assert.Equal(t, inst.ID, b.ServiceInstanceID)
	require.NotEmpty(t, b.Credentials)

	// Eventing gets the binding's credentials, as a secret.
	assert.Equal(t, []overrides.Entry{
		{Key: provisioning.EMSEnabledKey, Value: "true"},
		{Key: provisioning.EMSCredentialsKey, Secret: true},
	}, out.Data.Overrides[provisioning.EventingComponent])
	raw := out.Secrets[overrides.SecretKey(provisioning.EventingComponent, provisioning.EMSCredentialsKey)]
	var creds map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &creds))
	assert.Equal(t, b.Credentials, creds)
	assertNotInData(t, out, raw)
	mgmt := creds["management"].([]any)[0].(map[string]any)
	assertNotInData(t, out, mgmt["oa2"].(map[string]any)["clientsecret"].(string))
}

func TestProvisionEMS_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := newOp(provData("azure", "westeurope"))
	first := e.mustRun(t, emsStep(e), op, t0)
	// Lost result: the rerun finds the instance and the binding by name.
	again := e.mustRun(t, emsStep(e), op, t0.Add(testPoll))
	assert.Equal(t, first.Data, again.Data)
	assert.Equal(t, first.Secrets, again.Secrets)
	// A rerun of the finished step.
	again = e.mustRun(t, emsStep(e), again, t0.Add(2*testPoll))
	assert.Equal(t, first.Data, again.Data)

	name := provisioning.EMSName(testOpID)
	objs := objects[smstandin.Objects](t, e, "servicemanager")
	assert.Len(t, objs.Instances, 1)
	assert.Len(t, objs.Bindings, 1)
	assert.Equal(t, 1, objs.InstanceCreatesByName[name], "exactly one instance")
	assert.Equal(t, 1, objs.BindingCreatesByName[name], "exactly one binding")
}

// A ready instance costs its creation, the creation's answer read back and the binding: no
// look-ups by name (Service Manager refuses a second object of a name) and, after the first,
// no catalog reads (the plan ID is cached).
func TestProvisionEMS_Requests(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	requests := func() int {
		st, err := e.sb.Sandbox.Stats("servicemanager")
		require.NoError(t, err)
		return st.Requests
	}
	e.mustRun(t, emsStep(e), newOp(provData("azure", "westeurope")), t0)
	first := requests()
	assert.Equal(t, 1+2+3, first, "token, offering and plan, then instance, its read-back and the binding")

	op := newOp(provData("azure", "westeurope"))
	op.ID = "op-2"
	e.mustRun(t, emsStep(e), op, t0)
	assert.Equal(t, 3, requests()-first, "instance, its read-back and the binding")
}

func TestProvisionEMS_DownRetriesThenFails(t *testing.T) {
	t.Run("provisioning", func(t *testing.T) {
		e := newSystemsEnv(t, standins.Options{})
		out := e.downThenGiveUp(t, emsStep(e), newOp(provData("azure", "westeurope")), "servicemanager", emsSystem)
		assert.Contains(t, out.LastError, "provisioning Enterprise Messaging")
		assert.Empty(t, out.Data.Resources.EMSInstanceID)
		assert.Empty(t, objects[smstandin.Objects](t, e, "servicemanager").Instances)
	})
	t.Run("binding", func(t *testing.T) {
		e := newSystemsEnv(t, standins.Options{SMProvisionDelay: smProvisionDelay})
		waiting, wait, err := e.run(emsStep(e), newOp(provData("azure", "westeurope")), t0)
		require.NoError(t, err)
		require.Equal(t, testPoll, wait)
		out := e.downThenGiveUp(t, emsStep(e), waiting, "servicemanager", emsSystem)
		assert.Equal(t, waiting.Data.Resources.EMSInstanceID, out.Data.Resources.EMSInstanceID, "the instance is kept")
		assert.Empty(t, out.Data.Overrides)
	})
}

// Credentials the Service Manager rejects are a configuration error: retrying cannot help.
func TestProvisionEMS_RejectedCredentialsFail(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{Credentials: standins.Credentials{SMClientSecret: "rotated"}})
	out, wait, err := e.run(emsStep(e), newOp(provData("azure", "westeurope")), t0)
	assertFailed(t, wait, err, emsSystem, "Provision EMS")
	assert.Empty(t, out.Data.Resources.EMSInstanceID)
	assert.Empty(t, objects[smstandin.Objects](t, e, "servicemanager").Instances)
}
