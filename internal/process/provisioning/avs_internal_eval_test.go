package provisioning_test

import (
	"context"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func internalEvalStep(e *env) step { return provisioning.AVSInternalEval{Deps: e.deps} }

// evaluation returns the sandbox's evaluation named name.
func evaluation(t *testing.T, objs avsstandin.Objects, name string) avsstandin.Object {
	t.Helper()
	var found []avsstandin.Object
	for _, ev := range objs.Evaluations {
		if ev.Name == name {
			found = append(found, ev)
		}
	}
	require.Len(t, found, 1, "evaluations named %s", name)
	return found[0]
}

func TestAVSInternalEval_Name(t *testing.T) {
	assert.Equal(t, "AVS_Create_Internal_Eval_Step", provisioning.AVSInternalEval{}.Name())
}

func TestAVSInternalEval_CreatesTheEvaluation(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.mustRun(t, internalEvalStep(e), newOp(provData("azure", "westeurope")), t0)

	objs := objects[avsstandin.Objects](t, e, "avs")
	ev := evaluation(t, objs, "kyma-internal-"+testInstanceID)
	assert.Equal(t, ev.ID, out.Data.Resources.AVSInternalEvaluationID)
	assert.Empty(t, out.LastError)
	set := e.deps.Systems.AVSSettings
	assert.Equal(t, int64(standins.AVSParentID), ev.ParentID, "under the configured parent")
	assert.Equal(t, set.ParentID, ev.ParentID)
	assert.Equal(t, set.InternalTesterAccessID, ev.TesterAccessID)
	assert.Equal(t, "BASIC", ev.DefinitionType)
	assert.Equal(t, "HTTPSGET", ev.CheckType)
	assert.Equal(t, "https://dash.example/?kubeconfigID="+testInstanceID, ev.URL)
	assert.Contains(t, ev.Description, testInstanceID)
	assert.Contains(t, ev.Description, testGA)
	assert.Equal(t, 1, objs.CreatesByName[ev.Name])
	assert.Empty(t, out.Secrets)
}

func TestAVSInternalEval_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := newOp(provData("azure", "westeurope"))
	again := e.mustRun(t, internalEvalStep(e), op, t0)

	// A rerun of the finished step does not call AVS at all.
	before := objects[avsstandin.Objects](t, e, "avs").Calls
	e.mustRun(t, internalEvalStep(e), again, t0.Add(2*testPoll))
	objs := objects[avsstandin.Objects](t, e, "avs")
	assert.Equal(t, before, objs.Calls)
	assert.Equal(t, 1, objs.CreatesByName["kyma-internal-"+testInstanceID], "exactly one evaluation")
	evaluation(t, objs, "kyma-internal-"+testInstanceID)
}

func TestAVSInternalEval_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.downThenGiveUp(t, internalEvalStep(e), newOp(provData("azure", "westeurope")), "avs", "AVS")
	assert.Contains(t, out.LastError, "creating the internal evaluation")
	assert.Zero(t, out.Data.Resources.AVSInternalEvaluationID)
	assert.Empty(t, objects[avsstandin.Objects](t, e, "avs").CreatesByName)
}

func TestAVSInternalEval_RecoversWithinTheRetryWindow(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	e.down(t, "avs")
	out, wait, err := e.run(internalEvalStep(e), startedAt(newOp(provData("azure", "westeurope")), "AVS_Create_Internal_Eval_Step", t0), t0)
	assertRetrying(t, out, wait, err, "AVS")

	e.up(t, "avs")
	out = e.mustRun(t, internalEvalStep(e), out, t0.Add(testPoll))
	assert.NotZero(t, out.Data.Resources.AVSInternalEvaluationID)
	assert.Empty(t, out.LastError, "no stale error once the step succeeded")
	assert.Equal(t, 1, objects[avsstandin.Objects](t, e, "avs").CreatesByName["kyma-internal-"+testInstanceID])
}

// A configured parent evaluation that AVS does not know is a configuration error: retrying
// cannot help.
func TestAVSInternalEval_UnknownParentFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{AVSParentIDs: []int64{999}})
	out, wait, err := e.run(internalEvalStep(e), newOp(provData("azure", "westeurope")), t0)
	assertFailed(t, wait, err, "AVS", "AVS_Create_Internal_Eval_Step")
	assert.Contains(t, err.Error(), "parent evaluation 1000 does not exist")
	assert.Contains(t, err.Error(), "failed")
	assert.Zero(t, out.Data.Resources.AVSInternalEvaluationID)
}

// AVS cannot be searched by name: when the answer to a creation is lost, the step does not send it
// again in the same run, records the evaluation AVS may hold for an operator, and creates it again
// in its next run.
func TestAVSInternalEval_LostAnswerIsRecorded(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := startedAt(newOp(provData("azure", "westeurope")), "AVS_Create_Internal_Eval_Step", t0)
	// Only the creation's answer is lost: the token is fetched first.
	_, err := e.sb.Systems.AVS.GetEvaluation(context.Background(), standins.AVSParentID)
	require.NoError(t, err)
	e.sb.Faults(t, "avs", sandbox.Faults{LostResponseRate: 1})
	out, wait, err := e.run(internalEvalStep(e), op, t0)
	assertRetrying(t, out, wait, err, "AVS")
	assert.Contains(t, out.LastError, "outcome is unknown")
	assert.Equal(t, []string{"kyma-internal-" + testInstanceID}, out.Data.Resources.AVSUnconfirmed)
	assert.Zero(t, out.Data.Resources.AVSInternalEvaluationID)
	assert.Equal(t, 1, objects[avsstandin.Objects](t, e, "avs").CreatesByName["kyma-internal-"+testInstanceID], "sent once")

	e.up(t, "avs")
	out = e.mustRun(t, internalEvalStep(e), out, t0.Add(testPoll))
	assert.NotZero(t, out.Data.Resources.AVSInternalEvaluationID)
	assert.Equal(t, []string{"kyma-internal-" + testInstanceID}, out.Data.Resources.AVSUnconfirmed, "kept for an operator")
}
