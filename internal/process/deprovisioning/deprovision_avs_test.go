package deprovisioning

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var avsCleanup = cleanupStep{
	step:    func(d Deps) engine.Step[instance.DeprovisioningData] { return DeprovisionAVS{d} },
	sandbox: "avs", system: "AVS",
	create: createEvaluations,
	cleared: func(r instance.Resources) instance.Resources {
		r.AVSInternalEvaluationID, r.AVSExternalEvaluationID = 0, 0
		return r
	},
	remaining:        func(t *testing.T, e *env) int { return len(evaluationIDs(t, e)) },
	deletions:        func(t *testing.T, e *env) int { return sum(objects[avsstandin.Objects](t, e, "avs").DeletesByName) },
	wrongCredentials: func(c *standins.Credentials) { c.AVSClientSecret = "rotated" },
}

// createEvaluations creates the runtime's internal and external evaluations in the sandbox, as
// provisioning does, and returns the resources naming them.
func createEvaluations(t *testing.T, e *env) instance.Resources {
	t.Helper()
	create := func(name string) int64 {
		ev, err := e.sys.Systems.AVS.CreateEvaluation(testCtx(t), &avs.EvaluationRequest{
			Name: name, DefinitionType: "BASIC", CheckType: "HTTPSGET", URL: "https://dashboard.example/?kubeconfigID=" + testInstanceID,
			Interval: 180, Timeout: 30000, Threshold: 30000, ParentID: standins.AVSParentID, Visibility: "PUBLIC",
		})
		require.NoError(t, err)
		return ev.ID
	}
	return instance.Resources{AVSInternalEvaluationID: create("internal-" + testInstanceID), AVSExternalEvaluationID: create("external-" + testInstanceID), AVSTagged: true}
}

// evaluationIDs are the evaluations in the sandbox but the pre-provisioned parent.
func evaluationIDs(t *testing.T, e *env) []int64 {
	t.Helper()
	var ids []int64
	for _, ev := range objects[avsstandin.Objects](t, e, "avs").Evaluations {
		if ev.ID != standins.AVSParentID {
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

func TestDeprovisionAVS_Name(t *testing.T) {
	assert.Equal(t, "De-provision_AVS_Evaluations", DeprovisionAVS{}.Name())
}

func TestDeprovisionAVS(t *testing.T) { testCleanupStep(t, avsCleanup) }

func TestDeprovisionAVS_DeletesBothEvaluationsNotTheParent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createEvaluations(t, e)

	out, wait, err := runStep(e, DeprovisionAVS{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	assert.Zero(t, out.Data.Resources.AVSInternalEvaluationID)
	assert.Zero(t, out.Data.Resources.AVSExternalEvaluationID)
	objs := objects[avsstandin.Objects](t, e, "avs")
	assert.Equal(t, map[string]int{"internal-" + testInstanceID: 1, "external-" + testInstanceID: 1}, objs.DeletesByName)
	require.Len(t, objs.Evaluations, 1)
	assert.EqualValues(t, standins.AVSParentID, objs.Evaluations[0].ID, "the pre-provisioned parent evaluation stays")
}

func TestDeprovisionAVS_OnlyTheRecordedEvaluation(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createEvaluations(t, e)
	external := res.AVSExternalEvaluationID
	res.AVSExternalEvaluationID = 0 // provisioning stopped before it recorded the external evaluation

	out, wait, err := runStep(e, DeprovisionAVS{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	assert.Zero(t, out.Data.Resources.AVSInternalEvaluationID)
	assert.Equal(t, []int64{external}, evaluationIDs(t, e))
	assert.Equal(t, 1, objects[avsstandin.Objects](t, e, "avs").Calls["delete"])
}

// AVS refuses to delete a subevaluation: the step removes each from its parent first.
func TestDeprovisionAVS_UnlinksBeforeDeleting(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createEvaluations(t, e)
	out, wait, err := runStep(e, DeprovisionAVS{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	objs := objects[avsstandin.Objects](t, e, "avs")
	assert.Equal(t, 2, objs.Calls["removeChild"])
	assert.Equal(t, 2, objs.Calls["delete"], "no delete refused")
}

func TestDeprovisionAVS_OneAlreadyGone(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := createEvaluations(t, e)
	require.NoError(t, e.sys.Systems.AVS.RemoveParent(testCtx(t), standins.AVSParentID, res.AVSExternalEvaluationID))
	require.NoError(t, e.sys.Systems.AVS.DeleteEvaluation(testCtx(t), res.AVSExternalEvaluationID))

	out, wait, err := runStep(e, DeprovisionAVS{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	assert.Equal(t, avsCleanup.cleared(res), out.Data.Resources)
	assert.Empty(t, evaluationIDs(t, e))
}
