package acceptance

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortWindows make a system outage outlast the steps' retry windows within a test.
func shortWindows(c *externals.Config) {
	c.Settings.CallTimeout, c.Settings.RetryTime, c.Settings.CleanupRetryTime = time.Second, 2*time.Second, 2*time.Second
}

func TestAnOutageLongerThanTheRetryWindowFailsProvisioningNamingStepAndSystem(t *testing.T) {
	b := bt.Start(t, bt.Options{Externals: shortWindows})
	require.NoError(t, b.Sandbox.SetFaults("edp", sandbox.Faults{OutageUntil: time.Now().Add(time.Hour)}))
	id := uuid.NewString()
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-outage"), bt.SAPContext("ga-out", "sa-out")))
	require.Equal(t, http.StatusAccepted, prov.Status)

	lo := b.WaitForLastOperation(id, prov.Operation(), 30*time.Second)
	assert.Equal(t, domain.Failed, lo.State)
	assert.Contains(t, lo.Description, "EDP", "names the system")
	assert.Contains(t, lo.Description, "EDP_Registration", "names the step")
	started, _ := stepsOf(events(t, b, prov.Operation()))
	assert.NotContains(t, started, "Create_Runtime", "no runtime is requested after a failed step")

	// The platform then deprovisions the failed instance: what the failed provisioning created
	// (AVS, IAS) is removed.
	require.NoError(t, b.Sandbox.SetFaults("edp", sandbox.Faults{}))
	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status, del.String())
	b.WaitSucceeded(id, del.Operation())
	inv := readInventory(t, b.SandboxURL)
	assert.Empty(t, inv.evaluations())
	assert.Empty(t, inv.IAS.ServiceProviders)
}

func TestAnOutageDuringDeprovisioningLeavesTheStepNotCompleted(t *testing.T) {
	b := bt.Start(t, bt.Options{Externals: shortWindows})
	id := uuid.NewString()
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-outage2"), bt.SAPContext("ga-out2", "sa-out2")))
	require.Equal(t, http.StatusAccepted, prov.Status)
	b.WaitSucceeded(id, prov.Operation())

	require.NoError(t, b.Sandbox.SetFaults("ias", sandbox.Faults{OutageUntil: time.Now().Add(time.Hour)}))
	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status)
	b.WaitSucceeded(id, del.Operation())

	op, err := b.Store.Operations().GetOperation(context.Background(), del.Operation())
	require.NoError(t, err)
	assert.Equal(t, []string{"IAS_Deregistration"}, op.Progress.ExecutedButNotCompleted)
	var note string
	for _, e := range events(t, b, del.Operation()) {
		if e.Step == "IAS_Deregistration" && e.Type == "succeeded" {
			note = e.Message
		}
	}
	assert.Contains(t, note, "executed but not completed", "/events tells the step gave up")
	assert.Contains(t, note, "IAS", "and names the system")
	inv := readInventory(t, b.SandboxURL)
	assert.Len(t, inv.IAS.ServiceProviders, 1, "the service provider is left behind, recorded on the operation")
	assert.Empty(t, inv.evaluations(), "the other systems were cleaned up")
	assert.Empty(t, inv.SM.Instances)
	assert.Empty(t, inv.liveClusters())
}
