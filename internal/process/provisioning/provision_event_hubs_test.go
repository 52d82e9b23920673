package provisioning_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func eventHubsStep(e *env) step { return provisioning.ProvisionEventHubs{Deps: e.deps} }

const activation = 2 * time.Minute

// kyma1Azure is an Azure runtime with Kyma 1.x, whose eventing uses Event Hubs.
func kyma1Azure() Op {
	op := newOp(provData("azure", "westeurope"))
	op.Data.KymaVersion = "1.24.8"
	return op
}

func TestProvisionEventHubs_Name(t *testing.T) {
	assert.Equal(t, "Provision Azure Event Hubs", provisioning.ProvisionEventHubs{}.Name())
}

func TestEventHubNames(t *testing.T) {
	rg, ns := provisioning.EventHubNames(testOpID)
	rg2, ns2 := provisioning.EventHubNames(testOpID)
	assert.Equal(t, rg, rg2, "a retry asks for the same names")
	assert.Equal(t, ns, ns2)
	other, otherNS := provisioning.EventHubNames("op-2")
	assert.NotEqual(t, rg, other, "another operation (a resumed trial) gets new names")
	assert.NotEqual(t, ns, otherNS)
	// Azure: namespaces 6-50 letters, digits and hyphens starting with a letter; groups up to 90.
	assert.Regexp(t, regexp.MustCompile(`^[a-z][a-z0-9-]{5,49}$`), ns)
	assert.LessOrEqual(t, len(rg), 90)
}

func TestProvisionEventHubs_WaitsForTheNamespaceThenGivesKafkaItsCredentials(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{AzureActivationTime: activation})
	rg, name := provisioning.EventHubNames(testOpID)

	out, wait, err := e.run(eventHubsStep(e), kyma1Azure(), t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait, "the new namespace is still activating")
	assert.Equal(t, "waiting for the Event Hubs namespace to be ready: Activating", out.LastError)
	assert.Equal(t, rg, out.Data.Resources.EventHubResourceGroup, "stored at once, so deprovisioning finds it")
	assert.Equal(t, name, out.Data.Resources.EventHubNamespace)
	assert.Empty(t, out.Data.Overrides)

	e.clock.Advance(activation + time.Second)
	out = e.mustRun(t, eventHubsStep(e), out, e.clock.Now())
	assert.Empty(t, out.LastError)

	objs := objects[azurestandin.Objects](t, e, "azure")
	require.Len(t, objs.ResourceGroups, 1)
	g := objs.ResourceGroups[0]
	assert.Equal(t, rg, g.Name)
	assert.Equal(t, "westeurope", g.Location)
	require.Len(t, g.Namespaces, 1)
	ns := g.Namespaces[0]
	assert.Equal(t, name, ns.Name)
	assert.True(t, ns.KafkaEnabled)
	assert.Equal(t, "Succeeded", ns.ProvisioningState)
	assert.Equal(t, map[string]string{"InstanceID": testInstanceID, "SubAccountID": testSA}, ns.Tags)

	assert.Equal(t, []overrides.Entry{
		{Key: provisioning.KafkaBrokersKey, Value: name + ".servicebus.windows.net:9093"},
		{Key: provisioning.KafkaUsernameKey, Value: "$ConnectionString"},
		{Key: provisioning.KafkaPasswordKey, Secret: true},
		{Key: provisioning.KafkaProviderKey, Value: "azure"},
	}, out.Data.Overrides[provisioning.KafkaComponent])
	conn := out.Secrets[overrides.SecretKey(provisioning.KafkaComponent, provisioning.KafkaPasswordKey)]
	assert.Contains(t, conn, "Endpoint=sb://")
	assertNotInData(t, out, conn)
}

func TestProvisionEventHubs_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := kyma1Azure()
	first := e.mustRun(t, eventHubsStep(e), op, t0)
	// Lost result: the rerun finds the namespace by name.
	again := e.mustRun(t, eventHubsStep(e), op, t0.Add(testPoll))
	assert.Equal(t, first.Data, again.Data)
	assert.Equal(t, first.Secrets, again.Secrets)
	// A rerun of the finished step.
	again = e.mustRun(t, eventHubsStep(e), again, t0.Add(2*testPoll))
	assert.Equal(t, first.Data, again.Data)

	_, name := provisioning.EventHubNames(testOpID)
	objs := objects[azurestandin.Objects](t, e, "azure")
	require.Len(t, objs.ResourceGroups, 1)
	assert.Len(t, objs.ResourceGroups[0].Namespaces, 1)
	assert.Equal(t, 1, objs.NamespaceCreatesByName[name], "exactly one namespace")
}

func TestProvisionEventHubs_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.downThenGiveUp(t, eventHubsStep(e), kyma1Azure(), "azure", "Azure Event Hubs")
	assert.Contains(t, out.LastError, "creating the namespace")
	assert.Empty(t, out.Data.Overrides)
	assert.Empty(t, objects[azurestandin.Objects](t, e, "azure").ResourceGroups)
}

func TestProvisionEventHubs_NoRegionFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := kyma1Azure()
	op.Data.Parameters.Region = ""
	out, wait, err := e.run(eventHubsStep(e), op, t0)
	assertFailed(t, wait, err, "Azure Event Hubs", "Provision Azure Event Hubs")
	assert.Contains(t, err.Error(), "region is empty")
	assert.Empty(t, out.Data.Overrides)
	assert.Empty(t, objects[azurestandin.Objects](t, e, "azure").ResourceGroups)
}
