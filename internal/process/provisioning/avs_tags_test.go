package provisioning_test

import (
	"context"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tagsStep(e *env) step { return provisioning.AVSTags{Deps: e.deps} }

// monitored is a finished runtime whose internal evaluation AVS_Create_Internal_Eval_Step created.
func monitored(t *testing.T, e *env) Op {
	t.Helper()
	return e.mustRun(t, internalEvalStep(e), ready(), t0)
}

func internalEvalTags(t *testing.T, e *env) []avsstandin.Tag {
	t.Helper()
	return evaluation(t, objects[avsstandin.Objects](t, e, "avs"), "kyma-internal-"+testInstanceID).Tags
}

func TestAVSTags_Name(t *testing.T) {
	assert.Equal(t, "AVS_Tags", provisioning.AVSTags{}.Name())
}

func TestAVSTags_TagsTheInternalEvaluation(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.mustRun(t, tagsStep(e), monitored(t, e), t0)
	assert.True(t, out.Data.Resources.AVSTagged)
	assert.Empty(t, out.LastError)

	set := e.deps.Systems.AVSSettings
	assert.ElementsMatch(t, []avsstandin.Tag{
		{Content: "rt-1", TagClassID: set.RuntimeIDTagClassID, TagClassName: "RuntimeID"},
		{Content: testInstanceID, TagClassID: set.InstanceIDTagClassID, TagClassName: "InstanceID"},
		{Content: "c-1a2b3c", TagClassID: set.ShootNameTagClassID, TagClassName: "ShootName"},
	}, internalEvalTags(t, e))
}

// The instance's tag comes with the evaluation's creation: tagging sends the runtime's two.
func TestAVSTags_SendsOnlyTheMissingTags(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := monitored(t, e)
	set := e.deps.Systems.AVSSettings
	assert.Equal(t, []avsstandin.Tag{{Content: testInstanceID, TagClassID: set.InstanceIDTagClassID, TagClassName: "InstanceID"}},
		internalEvalTags(t, e), "tagged at its creation")
	before, err := e.sb.Sandbox.Stats("avs")
	require.NoError(t, err)
	e.mustRun(t, tagsStep(e), op, t0)
	after, err := e.sb.Sandbox.Stats("avs")
	require.NoError(t, err)
	assert.Equal(t, 2, after.Requests-before.Requests, "the runtime ID and the shoot name")
	assert.Len(t, internalEvalTags(t, e), 3)
}

// An evaluation created without the instance's tag (by an earlier version) gets it.
func TestAVSTags_AddsTheInstanceTagWhenMissing(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	ev, err := e.sb.Systems.AVS.CreateEvaluation(context.Background(), &avs.EvaluationRequest{
		Name: provisioning.InternalEvaluationName(testInstanceID), DefinitionType: "BASIC", CheckType: "HTTPSGET",
		URL: "https://dash.example", Interval: 180, Timeout: 30000, Threshold: 30000, Visibility: "PUBLIC"})
	require.NoError(t, err)
	op := ready()
	op.Data.Resources.AVSInternalEvaluationID = ev.ID
	e.mustRun(t, tagsStep(e), op, t0)
	assert.Len(t, internalEvalTags(t, e), 3)
}

func TestAVSTags_NoShootNoShootTag(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := monitored(t, e)
	op.Data.ShootName = ""
	e.mustRun(t, tagsStep(e), op, t0)
	assert.Len(t, internalEvalTags(t, e), 2)
}

func TestAVSTags_SkippedWithoutInternalEvaluation(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.mustRun(t, tagsStep(e), ready(), t0)
	assert.False(t, out.Data.Resources.AVSTagged)
	assert.Empty(t, objects[avsstandin.Objects](t, e, "avs").Calls, "AVS is not called")
}

func TestAVSTags_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := monitored(t, e)
	e.mustRun(t, tagsStep(e), op, t0)
	out := e.mustRun(t, tagsStep(e), op, t0.Add(testPoll)) // lost result: tags again
	assert.True(t, out.Data.Resources.AVSTagged)
	assert.Len(t, internalEvalTags(t, e), 3, "no duplicated tags")

	before := objects[avsstandin.Objects](t, e, "avs").Calls
	e.mustRun(t, tagsStep(e), out, t0.Add(2*testPoll))
	assert.Equal(t, before, objects[avsstandin.Objects](t, e, "avs").Calls, "a finished step does not call AVS")
}

func TestAVSTags_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.downThenGiveUp(t, tagsStep(e), monitored(t, e), "avs", "AVS")
	assert.Contains(t, out.LastError, "tagging the internal evaluation")
	assert.False(t, out.Data.Resources.AVSTagged)
}

// An internal evaluation AVS no longer has cannot be tagged: retrying cannot help.
func TestAVSTags_MissingEvaluationFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := ready()
	op.Data.Resources.AVSInternalEvaluationID = 424242
	out, wait, err := e.run(tagsStep(e), op, t0)
	assertFailed(t, wait, err, "AVS", "AVS_Tags")
	assert.Contains(t, err.Error(), "not found")
	require.False(t, out.Data.Resources.AVSTagged)
}
