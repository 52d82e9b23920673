package deprovisioning

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const eventHubsStep = "Deprovision Azure Event Hubs"

var eventHubsCleanup = cleanupStep{
	step:    func(d Deps) engine.Step[instance.DeprovisioningData] { return DeprovisionEventHubs{d} },
	sandbox: "azure", system: "Azure Event Hubs",
	create: func(t *testing.T, e *env) instance.Resources {
		return createEventHubs(t, e, "kyma-eventhubs-0123456789abcdef01234567", "kyma0123456789abcdef01234567")
	},
	cleared: func(r instance.Resources) instance.Resources {
		r.EventHubResourceGroup, r.EventHubNamespace = "", ""
		return r
	},
	remaining: func(t *testing.T, e *env) int {
		return len(objects[azurestandin.Objects](t, e, "azure").ResourceGroups)
	},
	deletions: func(t *testing.T, e *env) int {
		return sum(objects[azurestandin.Objects](t, e, "azure").GroupDeletesByName)
	},
	wrongCredentials: func(c *standins.Credentials) { c.AzureClientSecret = "rotated" },
}

// createEventHubs creates the resource group and Event Hubs namespace in the sandbox, as
// provisioning does for Kyma 1.x on Azure.
func createEventHubs(t *testing.T, e *env, group, namespace string) instance.Resources {
	t.Helper()
	ns, err := e.sys.Systems.EventHubs.EnsureNamespace(testCtx(t), eventhubs.NamespaceRequest{
		ResourceGroup: group, Name: namespace, Region: "westeurope",
		Tags: map[string]string{"InstanceID": testInstanceID, "SubAccountID": testSA},
	})
	require.NoError(t, err)
	return instance.Resources{EventHubResourceGroup: group, EventHubNamespace: ns.Name}
}

func TestDeprovisionEventHubs_Name(t *testing.T) {
	assert.Equal(t, eventHubsStep, DeprovisionEventHubs{}.Name())
}

func TestDeprovisionEventHubs(t *testing.T) { testCleanupStep(t, eventHubsCleanup) }

func TestDeprovisionEventHubs_DeletesTheGroupWithItsNamespace(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	res := eventHubsCleanup.create(t, e)
	createEventHubs(t, e, "kyma-eventhubs-other", "kymaother0123456789")

	out, wait, err := runStep(e, DeprovisionEventHubs{e.deps}, withResources(res), t0)
	assertDone(t, out, wait, err)
	assert.Empty(t, out.Data.Resources.EventHubResourceGroup)
	assert.Empty(t, out.Data.Resources.EventHubNamespace)
	objs := objects[azurestandin.Objects](t, e, "azure")
	require.Len(t, objs.ResourceGroups, 1)
	assert.Equal(t, "kyma-eventhubs-other", objs.ResourceGroups[0].Name, "another runtime's group stays")
	assert.Equal(t, map[string]int{res.EventHubResourceGroup: 1}, objs.GroupDeletesByName)
}

// Azure takes a while to delete a resource group: the step waits, polling, without asking twice.
func TestDeprovisionEventHubs_WaitsForTheDeletion(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{AzureDeletionTime: 2 * time.Minute})
	res := eventHubsCleanup.create(t, e)
	step := DeprovisionEventHubs{e.deps}

	out, wait, err := runStep(e, step, withResources(res), t0)
	assertRetrying(t, out, wait, err, "Azure Event Hubs")
	assert.Equal(t, "Azure Event Hubs: deleting the resource group: still being deleted", out.LastError)
	assert.Equal(t, res, out.Data.Resources, "kept until the group is gone")
	objs := objects[azurestandin.Objects](t, e, "azure")
	require.Len(t, objs.ResourceGroups, 1)
	assert.Equal(t, azurestandin.StateDeleting, objs.ResourceGroups[0].ProvisioningState)

	e.clock.Advance(time.Minute)
	out, wait, err = runStep(e, step, out, t0.Add(time.Minute))
	assertRetrying(t, out, wait, err, "Azure Event Hubs")

	e.clock.Advance(time.Minute)
	out, wait, err = runStep(e, step, out, t0.Add(2*time.Minute))
	assertDone(t, out, wait, err)
	assert.Equal(t, instance.Resources{}, out.Data.Resources)
	objs = objects[azurestandin.Objects](t, e, "azure")
	assert.Empty(t, objs.ResourceGroups)
	assert.Equal(t, map[string]int{res.EventHubResourceGroup: 1}, objs.GroupDeletesByName, "the deletion was started once")
}

func TestDeprovisionEventHubs_DeletionOutlastsTheWindow(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{AzureDeletionTime: time.Hour})
	res := eventHubsCleanup.create(t, e)
	op, past, _ := pastCleanupWindow(e, withResources(res), eventHubsStep)

	out, wait, err := runStep(e, DeprovisionEventHubs{e.deps}, op, past)
	assertGaveUp(t, out, wait, err, eventHubsStep, "Azure Event Hubs")
	assert.Contains(t, out.LastError, "still being deleted")
	assert.Equal(t, res, out.Data.Resources, "recorded as left behind")
}
