package provisioning_test

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems/systemstest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func edpStep(e *env) step { return provisioning.EDPRegistration{Deps: e.deps} }

// dataTenantKey is how the EDP stand-in counts a runtime's data tenant.
func dataTenantKey(e *env) string {
	return standins.EDPNamespace + "/" + testSA + "/" + e.deps.Systems.EDPEnvironment
}

func TestEDPRegistration_Name(t *testing.T) {
	assert.Equal(t, "EDP_Registration", provisioning.EDPRegistration{}.Name())
}

func TestEDPRegistration_RegistersTheSubaccount(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	require.NotEmpty(t, e.deps.Systems.EDPEnvironment)
	out := e.mustRun(t, edpStep(e), newOp(provData("azure", "westeurope")), t0)
	assert.Equal(t, testSA, out.Data.Resources.EDPSubAccountID)
	assert.Empty(t, out.LastError)

	objs := objects[edpstandin.Objects](t, e, "edp")
	require.Len(t, objs.DataTenants, 1)
	dt := objs.DataTenants[0]
	assert.Equal(t, standins.EDPNamespace, dt.Namespace.Name)
	assert.Equal(t, testSA, dt.Name, "the data tenant is the subaccount")
	assert.Equal(t, e.deps.Systems.EDPEnvironment, dt.Environment)
	assert.Equal(t, map[string]string{
		provisioning.EDPEnvironmentKey: "CF",
		provisioning.EDPRegionKey:      "cf-eu10",
		provisioning.EDPSubAccountKey:  testSA,
		provisioning.EDPServicePlanKey: "standard",
	}, dt.Metadata)
	assert.Equal(t, 1, objs.CreatesByTenant[dataTenantKey(e)])
}

func TestEDPRegistration_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := newOp(provData("azure", "westeurope"))
	e.mustRun(t, edpStep(e), op, t0)
	// The first result was lost: registering again finds the data tenant (409) and sets the same
	// metadata.
	out := e.mustRun(t, edpStep(e), op, t0.Add(testPoll))
	assert.Equal(t, testSA, out.Data.Resources.EDPSubAccountID)

	// A rerun of the finished step does not call EDP.
	before := objects[edpstandin.Objects](t, e, "edp").Calls
	e.mustRun(t, edpStep(e), out, t0.Add(2*testPoll))
	objs := objects[edpstandin.Objects](t, e, "edp")
	assert.Equal(t, before, objs.Calls)
	assert.Len(t, objs.DataTenants, 1)
	assert.Equal(t, 1, objs.CreatesByTenant[dataTenantKey(e)], "exactly one data tenant")
	assert.Len(t, objs.DataTenants[0].Metadata, 4)
}

func TestEDPRegistration_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.downThenGiveUp(t, edpStep(e), newOp(provData("azure", "westeurope")), "edp", "EDP")
	assert.Contains(t, out.LastError, "registering the runtime")
	assert.Empty(t, out.Data.Resources.EDPSubAccountID)
	assert.Empty(t, objects[edpstandin.Objects](t, e, "edp").DataTenants)
}

// A namespace EDP does not know is a configuration error: retrying cannot help.
func TestEDPRegistration_UnknownNamespaceFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{EDPNamespaces: []string{"other"}})
	out, wait, err := e.run(edpStep(e), newOp(provData("azure", "westeurope")), t0)
	assertFailed(t, wait, err, "EDP", "EDP_Registration")
	assert.Contains(t, err.Error(), "not found")
	assert.Empty(t, out.Data.Resources.EDPSubAccountID)
}

// A dead EDP costs little: once its breaker is open, a run fails at once without sending a
// request, naming EDP and its last answer, and hands the wait back to the engine.
func TestEDPRegistration_DeadEDPCostsNoRequests(t *testing.T) {
	e := newEnv(t)
	e.sb = systemstest.StartWith(t, standins.Options{Now: e.clock.Now},
		clientkit.Calls{Attempts: 3, Timeout: 5 * time.Second, BreakerThreshold: 6, BreakerCooldown: time.Hour})
	e.deps.Systems = e.sb.Systems
	e.sb.Down(t, "edp")
	op := newOp(provData("azure", "westeurope"))

	requests := func() int {
		st, err := e.sb.Sandbox.Stats("edp")
		require.NoError(t, err)
		return st.Requests
	}
	for i := range 2 { // 2 runs of 3 attempts open the breaker
		start := time.Now()
		out, wait, err := e.run(edpStep(e), op, t0)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "temporary failure after 3 attempt(s)")
		t.Logf("run %d against a dead EDP: %s, %d requests so far", i+1, time.Since(start), requests())
	}
	sent := requests()
	for i := range 3 {
		start := time.Now()
		out, wait, err := e.run(edpStep(e), op, t0)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait, "the wait goes back to the engine")
		assert.Contains(t, out.LastError, "EDP: registering the runtime")
		assert.Contains(t, out.LastError, "edp not called: it failed 6 times in a row")
		assert.Contains(t, out.LastError, "last answer:")
		t.Logf("run %d with the breaker open: %s", i+3, time.Since(start))
	}
	assert.Equal(t, sent, requests(), "no request while the breaker is open")
}

// maasConsumerEnvironment follows the platform region and maasConsumerServicePlan the plan, in
// EDP's values; the data tenant is the lower-case subaccount.
func TestEDPRegistration_MetadataValues(t *testing.T) {
	for _, tc := range []struct {
		plan, platformRegion, env, servicePlan string
	}{
		{"azure", "cf-eu10", "CF", "standard"},
		{"aws", "k8s-eu20", "KUBERNETES", "standard"},
		{"free", "neo-eu1", "NEO", "free"},
		{"azure_lite", "cf-us10", "CF", "tdd"},
		{"gcp", "eu-west", "CF", "standard"},
	} {
		t.Run(tc.plan+"/"+tc.platformRegion, func(t *testing.T) {
			e := newSystemsEnv(t, standins.Options{})
			data := provData(tc.plan, "westeurope")
			data.PlatformRegion = tc.platformRegion
			data.Context.SubAccountID = "SA-Upper"
			out := e.mustRun(t, edpStep(e), newOp(data), t0)
			assert.Equal(t, "sa-upper", out.Data.Resources.EDPSubAccountID)
			objs := objects[edpstandin.Objects](t, e, "edp")
			require.Len(t, objs.DataTenants, 1)
			assert.Equal(t, "sa-upper", objs.DataTenants[0].Name)
			assert.Equal(t, map[string]string{
				provisioning.EDPEnvironmentKey: tc.env,
				provisioning.EDPRegionKey:      tc.platformRegion,
				provisioning.EDPSubAccountKey:  "sa-upper",
				provisioning.EDPServicePlanKey: tc.servicePlan,
			}, objs.DataTenants[0].Metadata)
		})
	}
}
