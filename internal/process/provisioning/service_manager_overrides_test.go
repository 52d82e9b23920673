package provisioning_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func smOverridesStep(e *env) step { return provisioning.ServiceManagerOverrides{Deps: e.deps} }

func TestServiceManagerOverrides_Name(t *testing.T) {
	assert.Equal(t, "ServiceManagerOverrides", provisioning.ServiceManagerOverrides{}.Name())
}

// The step hands the proxy the configured credentials; it calls no system, so it has no failure
// path of its own (the process skips it when no credentials are configured).
func TestServiceManagerOverrides_GivesTheProxyTheCredentials(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	creds, ok := e.deps.Systems.ServiceManager.DefaultCredentials()
	require.True(t, ok)
	sb := standins.DefaultCredentials()
	require.Equal(t, sb.SMClientID, creds.ClientID, "the sandbox's credentials")

	out := e.mustRun(t, smOverridesStep(e), newOp(provData("azure", "westeurope")), t0)
	assert.Equal(t, []overrides.Entry{
		{Key: provisioning.SMURLKey, Value: creds.URL},
		{Key: provisioning.SMTokenURLKey, Value: creds.TokenURL},
		{Key: provisioning.SMClientIDKey, Secret: true},
		{Key: provisioning.SMClientSecretKey, Secret: true},
	}, out.Data.Overrides[provisioning.SMProxyComponent])
	assert.Equal(t, sb.SMClientID, out.Secrets[overrides.SecretKey(provisioning.SMProxyComponent, provisioning.SMClientIDKey)])
	assert.Equal(t, sb.SMClientSecret, out.Secrets[overrides.SecretKey(provisioning.SMProxyComponent, provisioning.SMClientSecretKey)])
	assertNotInData(t, out, sb.SMClientID, sb.SMClientSecret)
	assert.Empty(t, objects[smstandin.Objects](t, e, "servicemanager").Calls, "no call to the Service Manager")
}

func TestServiceManagerOverrides_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	first := e.mustRun(t, smOverridesStep(e), newOp(provData("azure", "westeurope")), t0)
	again := e.mustRun(t, smOverridesStep(e), first, t0.Add(testPoll))
	assert.Equal(t, first.Data.Overrides, again.Data.Overrides)
	assert.Len(t, again.Data.Overrides[provisioning.SMProxyComponent], 4, "no duplicated entries")
	assert.Equal(t, first.Secrets, again.Secrets)
}
