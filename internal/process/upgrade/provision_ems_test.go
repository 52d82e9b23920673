package upgrade

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const emsStep = "Provision EMS"

func runEMS(ctx context.Context, e *env, op KymaOp, now time.Time) (KymaOp, time.Duration, error) {
	return steptest.Run(ctx, ProvisionEMS{e.deps}, op, now)
}

func smObjects(t *testing.T, e *env) smstandin.Objects {
	return objects[smstandin.Objects](t, e, "servicemanager")
}

func TestProvisionEMS_Name(t *testing.T) {
	assert.Equal(t, emsStep, ProvisionEMS{}.Name())
}

func TestProvisionEMS_ProvisionsAndBinds(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.initialized(t, "2.21.0")

	out, wait, err := runEMS(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)

	objs := smObjects(t, e)
	name := provisioning.EMSName(op.ID)
	require.Len(t, objs.Instances, 1)
	require.Len(t, objs.Bindings, 1)
	in, b := objs.Instances[0], objs.Bindings[0]
	assert.Equal(t, name, in.Name)
	assert.Equal(t, []string{testInstanceID}, in.Labels["instance_id"])
	assert.Equal(t, name, b.Name)
	assert.Equal(t, in.ID, b.ServiceInstanceID)
	assert.Equal(t, in.ID, out.Data.Resources.EMSInstanceID)
	assert.Equal(t, b.ID, out.Data.Resources.EMSBindingID)
	assert.Equal(t, int64(42), out.Data.Resources.AVSInternalEvaluationID, "the other resources stay")

	assert.Equal(t, []overrides.Entry{{Key: provisioning.EMSEnabledKey, Value: "true"}, {Key: provisioning.EMSCredentialsKey, Secret: true}},
		out.Data.Overrides[provisioning.EventingComponent])
	var creds map[string]any
	require.NoError(t, json.Unmarshal([]byte(out.Secrets[emsCredentials]), &creds))
	assert.Equal(t, b.Credentials, creds, "the binding's credentials go to the eventing component")
	assert.NotContains(t, dataJSON(t, out.Data), out.Secrets[emsCredentials], "secret values never in the data")
	assert.Equal(t, grafanaSecret, out.Secrets[grafanaKey], "the copied secrets stay")
}

func TestProvisionEMS_WaitsForTheInstance(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{SMProvisionDelay: 30 * time.Second})
	op := e.initialized(t, "2.21.0")

	out, wait, err := runEMS(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "waiting for the Enterprise Messaging instance to be ready", out.LastError)
	assert.NotEmpty(t, out.Data.Resources.EMSInstanceID)
	assert.Empty(t, out.Data.Resources.EMSBindingID)
	assert.Empty(t, smObjects(t, e).Bindings)

	e.clock.Advance(31 * time.Second)
	out, wait, err = runEMS(context.Background(), e, out, e.clock.Now())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.NotEmpty(t, out.Data.Resources.EMSBindingID)
	objs := smObjects(t, e)
	assert.Len(t, objs.Instances, 1)
	assert.Len(t, objs.Bindings, 1)
	assert.Equal(t, 1, objs.InstanceCreatesByName[provisioning.EMSName(op.ID)])
}

func TestProvisionEMS_Idempotent(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.initialized(t, "2.21.0")
	first, _, err := runEMS(context.Background(), e, op, t0)
	require.NoError(t, err)

	// Run again, and again as if the first run's result had been lost.
	again, wait, err := runEMS(context.Background(), e, first, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, first.Data, again.Data)
	lost, wait, err := runEMS(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, first.Data.Resources, lost.Data.Resources, "the instance and binding are found by name")
	assert.Equal(t, first.Secrets[emsCredentials], lost.Secrets[emsCredentials])

	objs := smObjects(t, e)
	name := provisioning.EMSName(op.ID)
	assert.Len(t, objs.Instances, 1)
	assert.Len(t, objs.Bindings, 1)
	assert.Equal(t, 1, objs.InstanceCreatesByName[name])
	assert.Equal(t, 1, objs.BindingCreatesByName[name])
}

// A runtime that got EMS at provisioning (or an earlier upgrade) keeps its binding: no new one
// per upgrade.
func TestProvisionEMS_KeepsTheRuntimesEMS(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	earlier := e.initialized(t, "2.20.0")
	earlier.ID = "op-provisioning"
	earlier, _, err := runEMS(context.Background(), e, earlier, t0)
	require.NoError(t, err)
	before := smObjects(t, e)

	op := e.initialized(t, "2.21.0")
	op.Data.Resources, op.Data.Overrides, op.Secrets = earlier.Data.Resources, earlier.Data.Overrides, earlier.Secrets
	out, wait, err := runEMS(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, earlier.Data.Resources, out.Data.Resources)
	assert.Equal(t, earlier.Secrets[emsCredentials], out.Secrets[emsCredentials])
	after := smObjects(t, e)
	assert.Len(t, after.Bindings, 1)
	assert.Equal(t, before.Calls, after.Calls, "the Service Manager is not called")
}

func TestProvisionEMS_ServiceManagerDownRetries(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.initialized(t, "2.21.0")
	e.sb.Down(t, "servicemanager")

	out, wait, err := runEMS(downCtx(t), e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "Service Manager (EMS): provisioning Enterprise Messaging")
	assert.Empty(t, out.Data.Resources.EMSInstanceID)
	assert.Nil(t, out.Data.Overrides[provisioning.EventingComponent])
}

func TestProvisionEMS_GivesUpAfterRetryTime(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := tryingSince(e.initialized(t, "2.21.0"), emsStep, t0)
	e.sb.Down(t, "servicemanager")

	_, wait, err := runEMS(downCtx(t), e, op, t0.Add(testRetryTime-time.Second))
	require.NoError(t, err, "still within the retry time")
	assert.Equal(t, testPoll, wait)

	_, wait, err = runEMS(downCtx(t), e, op, t0.Add(testRetryTime+time.Second))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "Service Manager (EMS)")
	assert.Contains(t, err.Error(), "step Provision EMS gave up after 1m0s")
}

func TestProvisionEMS_MissingInstanceFailsAtOnce(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.initialized(t, "2.21.0")
	op.Data.Resources.EMSInstanceID = "no-such-instance"

	out, wait, err := runEMS(context.Background(), e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "Service Manager (EMS): provisioning Enterprise Messaging")
	assert.Contains(t, err.Error(), "step Provision EMS failed")
	assert.Empty(t, out.Data.Resources.EMSBindingID)
	assert.Empty(t, smObjects(t, e).Instances)
}
