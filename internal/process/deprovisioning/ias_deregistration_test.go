package deprovisioning

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var iasCleanup = cleanupStep{
	step:    func(d Deps) engine.Step[instance.DeprovisioningData] { return IASDeregistration{d} },
	sandbox: "ias", system: "IAS",
	create: createServiceProvider,
	cleared: func(r instance.Resources) instance.Resources {
		r.IASServiceProviderID, r.IASClientID = "", ""
		return r
	},
	remaining:        func(t *testing.T, e *env) int { return len(objects[iasstandin.Objects](t, e, "ias").ServiceProviders) },
	deletions:        func(t *testing.T, e *env) int { return sum(objects[iasstandin.Objects](t, e, "ias").DeletesByName) },
	wrongCredentials: func(c *standins.Credentials) { c.IASPassword = "rotated" },
}

// createServiceProvider registers the runtime's service provider with its OIDC client in the
// sandbox, as provisioning does.
func createServiceProvider(t *testing.T, e *env) instance.Resources {
	t.Helper()
	ias := e.sys.Systems.IAS
	sp, err := ias.CreateServiceProvider(testCtx(t), "kyma-"+testInstanceID)
	require.NoError(t, err)
	clientID, _, err := ias.GenerateSecret(testCtx(t), sp.ID)
	require.NoError(t, err)
	require.NoError(t, ias.ConfigureOIDC(testCtx(t), sp.ID, []string{"https://console.example/oauth/callback"}))
	return instance.Resources{IASServiceProviderID: sp.ID, IASClientID: clientID, IASOIDCConfigured: true}
}

func TestIASDeregistration_Name(t *testing.T) {
	assert.Equal(t, "IAS_Deregistration", IASDeregistration{}.Name())
}

func TestIASDeregistration(t *testing.T) { testCleanupStep(t, iasCleanup) }

func TestIASDeregistration_DeletesOnlyTheRuntimesServiceProvider(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createServiceProvider(t, e)
	other, err := e.sys.Systems.IAS.CreateServiceProvider(testCtx(t), "kyma-inst-other")
	require.NoError(t, err)

	out, wait, err := runStep(e, IASDeregistration{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.IASServiceProviderID)
	assert.Empty(t, out.Data.Resources.IASClientID, "the OIDC client went with the service provider")
	objs := objects[iasstandin.Objects](t, e, "ias")
	require.Len(t, objs.ServiceProviders, 1)
	assert.Equal(t, other.ID, objs.ServiceProviders[0].ID, "another runtime's service provider stays")
	assert.Equal(t, map[string]int{"kyma-" + testInstanceID: 1}, objs.DeletesByName)
}
