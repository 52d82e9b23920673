package provisioning_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const consoleURL = "https://console.c-1a2b3c.kyma.example"

func checkStep(e *env) step { return provisioning.CheckRuntime{Deps: e.deps} }

// requested is a provisioning operation whose runtime the provisioner accepted.
func requested() Op {
	op := newOp(provData("azure", "westeurope"))
	op.Data.RuntimeID, op.Data.ProvisionerOperationID = "rt-1", "pop-1"
	return op
}

func runCheck(e *env, op Op) (Op, time.Duration, error) { return e.run(checkStep(e), op, t0) }

// provisioned makes the fake provisioner answer that it finished runtime rt-1 on shoot c-1a2b3c.
func provisioned(e *env) {
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", "")
}

// registerInDirector registers runtime rt-1 in the Director stand-in, as the provisioner does,
// with labels.
func registerInDirector(t *testing.T, e *env, labels map[string]any) {
	t.Helper()
	_, err := e.sb.Built.Director.RegisterRuntime(context.Background(), testGA, "rt-1", "c1", "", labels)
	require.NoError(t, err)
}

func TestCheckRuntime_Name(t *testing.T) {
	assert.Equal(t, "Check_Runtime", provisioning.CheckRuntime{}.Name())
}

func TestCheckRuntime_SucceededSetsDashboardURL(t *testing.T) {
	e := newEnv(t)
	provisioned(e)

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, "c-1a2b3c", out.Data.ShootName, "from the runtime's status")
	assert.Empty(t, out.Data.ShootDomain, "without a Director the domain is unknown")

	assert.Equal(t, []provCall{
		{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"},
		{Method: "RuntimeConfiguration", Tenant: testGA, ID: "rt-1"},
	}, e.prov.Calls())

	inst := getInstance(t, e.store)
	assert.Equal(t, "https://dash.example/?kubeconfigID="+testInstanceID, inst.DashboardURL)
	assert.Nil(t, inst.DeletedAt)
	page, err := e.store.Lifecycle().FindRuntimes(context.Background(), storage.RuntimeQuery{ShootNames: []string{"c-1a2b3c"}})
	require.NoError(t, err)
	assert.Len(t, page.Items, 1, "the instance has the shoot name with its dashboard URL")
}

func TestCheckRuntime_KnownShootIsNotReadAgain(t *testing.T) {
	e := newEnv(t)
	provisioned(e)
	op := requested()
	op.Data.ShootName = "c-1a2b3c"
	out, wait, err := runCheck(e, op)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "c-1a2b3c", out.Data.ShootName)
	assert.Len(t, e.prov.CallsTo("RuntimeConfiguration"), 0)
}

func TestCheckRuntime_RuntimeStatusErrorPolls(t *testing.T) {
	e := newEnv(t)
	provisioned(e)
	e.prov.runtimeStatus = func(string, string) (*gqlschema.RuntimeStatus, error) { return nil, errors.New("timeout") }
	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "reading the runtime's configuration: timeout", out.LastError)
	assert.Empty(t, getInstance(t, e.store).DashboardURL)
}

func TestCheckRuntime_NotFinishedPolls(t *testing.T) {
	for _, state := range []gqlschema.OperationState{gqlschema.OperationStatePending, gqlschema.OperationStateInProgress} {
		t.Run(string(state), func(t *testing.T) {
			e := newEnv(t)
			e.prov.status = steptest.StatusReturning(opStatus("pop-1", state), nil)
			before := getInstance(t, e.store)

			op := requested()
			op.LastError = "reading the provisioner's operation: timeout"
			out, wait, err := runCheck(e, op)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Empty(t, out.LastError, "a running operation is no error")
			after := getInstance(t, e.store)
			assert.Equal(t, before.Version, after.Version, "nothing written")
			assert.Empty(t, after.DashboardURL)
		})
	}
}

func TestCheckRuntime_TransientErrorPolls(t *testing.T) {
	e := newEnv(t)
	e.prov.status = steptest.StatusReturning(nil, errors.New("connection reset"))
	before := getInstance(t, e.store)

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "reading the provisioner's operation: connection reset", out.LastError)
	assert.Equal(t, before.Version, getInstance(t, e.store).Version, "nothing written")
}

func TestCheckRuntime_ProvisionerFailureFails(t *testing.T) {
	for name, tc := range map[string]struct {
		st     *gqlschema.OperationStatus
		reason string
	}{
		"last error": {
			st: &gqlschema.OperationStatus{ID: strp("pop-1"), State: gqlschema.OperationStateFailed,
				Message: strp("generic"), LastError: &gqlschema.LastError{ErrMessage: "quota exceeded in westeurope", Reason: "ERR_INFRA_QUOTA_EXCEEDED"}},
			reason: "quota exceeded in westeurope",
		},
		"message only": {
			st:     &gqlschema.OperationStatus{ID: strp("pop-1"), State: gqlschema.OperationStateFailed, Message: strp("shoot creation timed out")},
			reason: "shoot creation timed out",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.status = steptest.StatusReturning(tc.st, nil)

			_, wait, err := runCheck(e, requested())
			require.Error(t, err)
			assert.Zero(t, wait)
			assert.Contains(t, err.Error(), "provisioner operation pop-1 failed")
			assert.Contains(t, err.Error(), tc.reason)
			assert.Empty(t, getInstance(t, e.store).DashboardURL)
		})
	}
}

func TestCheckRuntime_InstanceWriteFailurePolls(t *testing.T) {
	e := newEnv(t)
	provisioned(e)
	e.deps.Instances = &steptest.FailingInstances{Instances: e.store.Instances(), Fails: 1}

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "storing the dashboard URL")
	assert.Empty(t, getInstance(t, e.store).DashboardURL)

	// The next run stores it.
	_, wait, err = runCheck(e, out)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "https://dash.example/?kubeconfigID="+testInstanceID, getInstance(t, e.store).DashboardURL)
}

// With the Director, the runtime's own console is the dashboard and names its domain.
func TestCheckRuntime_DirectorConsoleIsTheDashboard(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	provisioned(e)
	registerInDirector(t, e, map[string]any{director.ConsoleURLLabel: consoleURL})

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, "c-1a2b3c.kyma.example", out.Data.ShootDomain)
	assert.Equal(t, consoleURL, getInstance(t, e.store).DashboardURL)

	// Reading it again (a rerun) changes nothing in the Director.
	_, _, err = runCheck(e, out)
	require.NoError(t, err)
	objs := objects[directorstandin.Objects](t, e, "director")
	assert.Len(t, objs.Tenants[testGA], 1)
	assert.Equal(t, 1, objs.RegistrationsByRuntimeID["rt-1"])
}

// The provisioner labels the runtime with its console once the cluster has a domain; until then
// the step retries, within the systems' retry window.
func TestCheckRuntime_NoConsoleURLRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	provisioned(e)
	registerInDirector(t, e, map[string]any{"other": "label"})

	out, wait, err := e.run(checkStep(e), startedAt(requested(), "Check_Runtime", t0), t0)
	assertRetrying(t, out, wait, err, "Director")
	assert.Equal(t, "Director: the runtime has no console URL", out.LastError)
	assert.Empty(t, getInstance(t, e.store).DashboardURL)

	_, wait, err = e.run(checkStep(e), out, afterRetryWindow())
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "Director: the runtime has no console URL: step Check_Runtime gave up")
	assert.Empty(t, getInstance(t, e.store).DashboardURL)
}

func TestCheckRuntime_DirectorDownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	provisioned(e)
	registerInDirector(t, e, map[string]any{director.ConsoleURLLabel: consoleURL})
	out := e.downThenGiveUp(t, checkStep(e), requested(), "director", "Director")
	assert.Contains(t, out.LastError, "reading the runtime's console URL")
	assert.Empty(t, getInstance(t, e.store).DashboardURL)

	// Back within the window, the step finishes.
	e.up(t, "director")
	_, wait, err := e.run(checkStep(e), out, t0.Add(testPoll))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, consoleURL, getInstance(t, e.store).DashboardURL)
}

// With the reconciler installing Kyma, Get_Kubeconfig runs next and needs the runtime's kubeconfig:
// Check_Runtime keeps it from the status it reads anyway, and Get_Kubeconfig asks nothing more.
func TestCheckRuntime_KeepsTheKubeconfigForTheReconciler(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	provisioned(e)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", testKubeconfig)
	registerInDirector(t, e, map[string]any{director.ConsoleURLLabel: consoleURL})

	out, wait, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, testKubeconfig, out.Secrets[provisioning.KubeconfigSecret])
	assertNotInData(t, out, "kubeconfig-t0ken")
	calls := len(e.prov.Calls())

	next := e.mustRun(t, kubeconfigStep(e), out, t0)
	assert.Equal(t, testKubeconfig, next.Secrets[provisioning.KubeconfigSecret])
	assert.Len(t, e.prov.Calls(), calls, "Get_Kubeconfig reads no status again")
}

// Without the reconciler no kubeconfig is kept in the operation.
func TestCheckRuntime_KeepsNoKubeconfigWithoutTheReconciler(t *testing.T) {
	e := newEnv(t)
	provisioned(e)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", testKubeconfig)
	out, _, err := runCheck(e, requested())
	require.NoError(t, err)
	assert.Empty(t, out.Secrets[provisioning.KubeconfigSecret])
}
