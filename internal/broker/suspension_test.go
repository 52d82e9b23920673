package broker_test

import (
	"net/http"
	"testing"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTrialSuspensionAndResumption: a trial's context.active=false removes its runtime and
// keeps the instance; active=true gives it a new runtime.
func TestTrialSuspensionAndResumption(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	id := newID()
	ctx := bt.SAPContext("ga-trial-suspend", "sa-trial-suspend")
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.TrialPlanID, map[string]any{"name": "trial-rt"}, ctx))
	requireStatus(t, http.StatusAccepted, prov)
	b.WaitSucceeded(id, prov.Operation())
	first := runtimeOf(t, b, id).RuntimeID
	require.NotEmpty(t, first)

	patch := func(active bool) bt.Response {
		c := bt.SAPContext("ga-trial-suspend", "sa-trial-suspend")
		c["active"] = active
		return b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "context": c})
	}
	suspend := patch(false)
	requireStatus(t, http.StatusAccepted, suspend)
	b.WaitSucceeded(id, suspend.Operation())
	rt := runtimeOf(t, b, id)
	assert.Empty(t, rt.RuntimeID, "the runtime is gone")
	assert.Nil(t, rt.Status.DeletedAt, "the instance stays")
	requireStatus(t, http.StatusOK, patch(false)) // already suspended: nothing to do

	resume := patch(true)
	requireStatus(t, http.StatusAccepted, resume)
	b.WaitSucceeded(id, resume.Operation())
	rt = runtimeOf(t, b, id)
	assert.NotEmpty(t, rt.RuntimeID)
	assert.NotEqual(t, first, rt.RuntimeID, "a resumed trial gets a new runtime")
	assert.Equal(t, "provisioned", rt.Status.State)

	lo := b.Get(bt.LastOperationPath(id, ""))
	requireStatus(t, http.StatusOK, lo)
	assert.Contains(t, string(lo.Body), `"state":"succeeded"`)
}
