package provisioning_test

import (
	"context"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const externalEvalName = "kyma-external-" + testInstanceID

func externalEvalStep(e *env) step { return provisioning.AVSExternalEval{Deps: e.deps} }

// setDashboard gives the stored instance the dashboard URL Check_Runtime stores.
func setDashboard(t *testing.T, e *env, url string) {
	t.Helper()
	_, err := storage.ModifyInstance(context.Background(), e.store.Instances(), testInstanceID, func(i *storage.Instance) { i.DashboardURL = url })
	require.NoError(t, err)
}

func TestAVSExternalEval_Name(t *testing.T) {
	assert.Equal(t, "AVS_Create_External_Eval_Step", provisioning.AVSExternalEval{}.Name())
}

func TestAVSExternalEval_MonitorsTheDashboard(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	setDashboard(t, e, consoleURL)
	out := e.mustRun(t, externalEvalStep(e), ready(), t0)

	objs := objects[avsstandin.Objects](t, e, "avs")
	ev := evaluation(t, objs, externalEvalName)
	assert.Equal(t, ev.ID, out.Data.Resources.AVSExternalEvaluationID)
	assert.Empty(t, out.LastError)
	assert.Equal(t, consoleURL, ev.URL, "the dashboard as users reach it")
	assert.Equal(t, e.deps.Systems.AVSSettings.ExternalTesterAccessID, ev.TesterAccessID)
	assert.Zero(t, ev.ParentID, "not under the internal parent")
	assert.Equal(t, "BASIC", ev.DefinitionType)
	assert.Contains(t, ev.Description, testInstanceID)
	assert.Equal(t, 1, objs.CreatesByName[externalEvalName])
}

func TestAVSExternalEval_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	setDashboard(t, e, consoleURL)
	op := ready()
	again := e.mustRun(t, externalEvalStep(e), op, t0)

	before := objects[avsstandin.Objects](t, e, "avs").Calls
	e.mustRun(t, externalEvalStep(e), again, t0.Add(2*testPoll))
	objs := objects[avsstandin.Objects](t, e, "avs")
	assert.Equal(t, before, objs.Calls, "a finished step does not call AVS")
	assert.Equal(t, 1, objs.CreatesByName[externalEvalName], "exactly one evaluation")
}

func TestAVSExternalEval_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	setDashboard(t, e, consoleURL)
	out := e.downThenGiveUp(t, externalEvalStep(e), ready(), "avs", "AVS")
	assert.Contains(t, out.LastError, "creating the external evaluation")
	assert.Zero(t, out.Data.Resources.AVSExternalEvaluationID)
	assert.Empty(t, objects[avsstandin.Objects](t, e, "avs").CreatesByName)
}

// AVS refuses an evaluation without a URL: an instance without a dashboard cannot be monitored.
func TestAVSExternalEval_NoDashboardFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out, wait, err := e.run(externalEvalStep(e), ready(), t0)
	assertFailed(t, wait, err, "AVS", "AVS_Create_External_Eval_Step")
	assert.Contains(t, err.Error(), "url is required")
	assert.Zero(t, out.Data.Resources.AVSExternalEvaluationID)
}

func TestAVSExternalEval_InstanceReadErrorPolls(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := ready()
	op.InstanceID = "gone"
	out, wait, err := e.run(externalEvalStep(e), op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "reading the instance")
	assert.Empty(t, objects[avsstandin.Objects](t, e, "avs").Calls, "AVS is not called")
}
