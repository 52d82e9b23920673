package deprovisioning

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var edpCleanup = cleanupStep{
	step:    func(d Deps) engine.Step[instance.DeprovisioningData] { return EDPDeregistration{d} },
	sandbox: "edp", system: "EDP",
	create: func(t *testing.T, e *env) instance.Resources { return registerInEDP(t, e, testSA) },
	cleared: func(r instance.Resources) instance.Resources {
		r.EDPSubAccountID = ""
		return r
	},
	remaining:        func(t *testing.T, e *env) int { return len(objects[edpstandin.Objects](t, e, "edp").DataTenants) },
	deletions:        func(t *testing.T, e *env) int { return sum(objects[edpstandin.Objects](t, e, "edp").DeletesByTenant) },
	wrongCredentials: func(c *standins.Credentials) { c.EDPClientSecret = "rotated" },
}

// registerInEDP registers a subaccount's runtime with metadata in the sandbox, as provisioning does.
func registerInEDP(t *testing.T, e *env, subaccount string) instance.Resources {
	t.Helper()
	require.NoError(t, e.sys.Systems.EDP.RegisterRuntime(testCtx(t), subaccount, map[string]string{
		"plan": "azure", "region": "westeurope", "environment": "dev",
	}))
	return instance.Resources{EDPSubAccountID: subaccount}
}

func TestEDPDeregistration_Name(t *testing.T) {
	assert.Equal(t, "EDP_Deregistration", EDPDeregistration{}.Name())
}

func TestEDPDeregistration(t *testing.T) { testCleanupStep(t, edpCleanup) }

func TestEDPDeregistration_RemovesTheSubaccountsDataTenantWithItsMetadata(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := registerInEDP(t, e, testSA)
	registerInEDP(t, e, "sa-other")
	require.Len(t, objects[edpstandin.Objects](t, e, "edp").DataTenants[0].Metadata, 3)

	out, wait, err := runStep(e, EDPDeregistration{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.EDPSubAccountID)
	objs := objects[edpstandin.Objects](t, e, "edp")
	require.Len(t, objs.DataTenants, 1)
	assert.Equal(t, "sa-other", objs.DataTenants[0].Name, "another subaccount's registration stays")
	assert.Equal(t, 1, sum(objs.DeletesByTenant))
	assert.Equal(t, 3, objs.Calls["metadata.delete"], "each metadata entry removed first")
}
