package upgrade

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const eventHubsStep = "Deprovision Azure Event Hubs"

func runEventHubs(ctx context.Context, e *env, op KymaOp, now time.Time) (KymaOp, time.Duration, error) {
	return steptest.Run(ctx, DeprovisionEventHubs{e.deps}, op, now)
}

func azureObjects(t *testing.T, e *env) azurestandin.Objects {
	return objects[azurestandin.Objects](t, e, "azure")
}

// withEventHubs is an initialised upgrade of a Kyma 1.x runtime whose provisioning created an
// Event Hubs namespace (in the sandbox) and gave its Kafka overrides.
func withEventHubs(t *testing.T, e *env) KymaOp {
	t.Helper()
	rg, ns := provisioning.EventHubNames("op-provisioning")
	_, err := e.sb.Systems.EventHubs.EnsureNamespace(context.Background(), eventhubs.NamespaceRequest{ResourceGroup: rg, Name: ns, Region: "westeurope"})
	require.NoError(t, err)
	op := e.initialized(t, "2.21.0")
	op.Data.Resources.EventHubResourceGroup, op.Data.Resources.EventHubNamespace = rg, ns
	op.Data.Overrides.Set(&op.Secrets, provisioning.KafkaComponent,
		overrides.Entry{Key: provisioning.KafkaBrokersKey, Value: ns + ".servicebus.windows.net:9093"},
		overrides.Entry{Key: provisioning.KafkaPasswordKey, Value: "Endpoint=sb://x;SharedAccessKey=k", Secret: true})
	return op
}

func TestDeprovisionEventHubs_Name(t *testing.T) {
	assert.Equal(t, eventHubsStep, DeprovisionEventHubs{}.Name())
}

func TestDeprovisionEventHubs_DeletesTheResourceGroup(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := withEventHubs(t, e)
	rg := op.Data.Resources.EventHubResourceGroup
	require.Len(t, azureObjects(t, e).ResourceGroups, 1)

	out, wait, err := runEventHubs(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Empty(t, out.Progress.ExecutedButNotCompleted)

	objs := azureObjects(t, e)
	assert.Empty(t, objs.ResourceGroups)
	assert.Equal(t, 1, objs.GroupDeletesByName[rg])
	assert.Empty(t, out.Data.Resources.EventHubResourceGroup)
	assert.Empty(t, out.Data.Resources.EventHubNamespace)
	assert.Equal(t, int64(42), out.Data.Resources.AVSInternalEvaluationID, "the other resources stay")
	assert.NotContains(t, out.Data.Overrides, provisioning.KafkaComponent, "the Kafka overrides pointed at the namespace")
	assert.Contains(t, out.Data.Overrides, "monitoring")
}

func TestDeprovisionEventHubs_NothingToDelete(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := e.initialized(t, "2.21.0")
	before := azureObjects(t, e).Calls

	out, wait, err := runEventHubs(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, op.Data, out.Data)
	assert.Equal(t, before, azureObjects(t, e).Calls, "Azure is not called")
}

func TestDeprovisionEventHubs_Idempotent(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := withEventHubs(t, e)
	rg := op.Data.Resources.EventHubResourceGroup
	first, _, err := runEventHubs(context.Background(), e, op, t0)
	require.NoError(t, err)

	again, wait, err := runEventHubs(context.Background(), e, first, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, first.Data, again.Data)

	// The first run's result lost: the group is missing, which is what was wanted.
	lost, wait, err := runEventHubs(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, lost.Progress.ExecutedButNotCompleted)
	assert.Equal(t, first.Data, lost.Data)
	objs := azureObjects(t, e)
	assert.Empty(t, objs.ResourceGroups)
	assert.Equal(t, 1, objs.GroupDeletesByName[rg])
	assert.Equal(t, 1, objs.GroupCreatesByName[rg])
}

func TestDeprovisionEventHubs_WaitsForTheDeletion(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{AzureDeletionTime: 2 * time.Minute})
	op := withEventHubs(t, e)

	out, wait, err := runEventHubs(context.Background(), e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "Azure Event Hubs: deleting the resource group: the resource group is still being deleted", out.LastError)
	assert.Equal(t, op.Data.Resources, out.Data.Resources, "kept until the group is gone")
	assert.Contains(t, out.Data.Overrides, provisioning.KafkaComponent)
	objs := azureObjects(t, e)
	require.Len(t, objs.ResourceGroups, 1)
	assert.Equal(t, "Deleting", objs.ResourceGroups[0].ProvisioningState)

	e.clock.Advance(2*time.Minute + time.Second)
	out, wait, err = runEventHubs(context.Background(), e, out, e.clock.Now())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Empty(t, out.Data.Resources.EventHubResourceGroup)
	assert.NotContains(t, out.Data.Overrides, provisioning.KafkaComponent)
	objs = azureObjects(t, e)
	assert.Empty(t, objs.ResourceGroups)
	assert.Equal(t, 1, objs.GroupDeletesByName[op.Data.Resources.EventHubResourceGroup])
}

func TestDeprovisionEventHubs_AzureDownRetries(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := withEventHubs(t, e)
	e.sb.Down(t, "azure")

	out, wait, err := runEventHubs(downCtx(t), e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "Azure Event Hubs: deleting the resource group")
	assert.Empty(t, out.Progress.ExecutedButNotCompleted)
	assert.Equal(t, op.Data.Resources, out.Data.Resources)
}

// Like deprovisioning, a namespace that cannot be deleted does not block the upgrade: the step
// gives up without failing and keeps the group recorded for the deprovisioning.
func TestDeprovisionEventHubs_GivesUpWithoutFailing(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	op := tryingSince(withEventHubs(t, e), eventHubsStep, t0)
	e.sb.Down(t, "azure")

	out, wait, err := runEventHubs(downCtx(t), e, op, t0.Add(testCleanupRetryTime-time.Second))
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait, "still within the cleanup retry time")
	assert.Empty(t, out.Progress.ExecutedButNotCompleted)

	out, wait, err = runEventHubs(downCtx(t), e, op, t0.Add(testCleanupRetryTime+time.Second))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, []string{eventHubsStep}, out.Progress.ExecutedButNotCompleted)
	assert.Contains(t, out.LastError, "Azure Event Hubs")
	assert.Equal(t, op.Data.Resources, out.Data.Resources, "still recorded, for the deprovisioning")
	assert.Len(t, azureObjects(t, e).ResourceGroups, 1, "the group is still there")
}
