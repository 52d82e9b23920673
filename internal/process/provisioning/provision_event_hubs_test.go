package provisioning_test

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
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

// longRunningAzure answers every namespace creation 202 Accepted; the operation reports
// InProgress twice, then ends.
func longRunningAzure(mode string) standins.Options {
	return standins.Options{AzureLongRunning: mode, AzureLongRunningPolls: 2, AzureRetryAfter: 15 * time.Second,
		AzureLongRunningTime: time.Hour}
}

// Azure creates the namespace asynchronously: each run is one request about the operation, whose
// URLs the operation keeps in its data (they survive a save and a reload), and waits as long as
// Azure asks; once the operation succeeded the step goes on as with a synchronous creation.
func TestProvisionEventHubs_FollowsAzuresLongRunningCreation(t *testing.T) {
	e := newSystemsEnv(t, longRunningAzure(azurestandin.LongRunningAll))
	rg, name := provisioning.EventHubNames(testOpID)

	out, wait, err := e.run(eventHubsStep(e), kyma1Azure(), t0)
	require.NoError(t, err)
	assert.Equal(t, 15*time.Second, wait, "Retry-After")
	assert.Equal(t, "waiting for Azure to create the Event Hubs namespace: Accepted", out.LastError)
	res := out.Data.Resources
	assert.Equal(t, rg, res.EventHubResourceGroup, "stored at once, so deprovisioning finds it")
	assert.Equal(t, name, res.EventHubNamespace)
	assert.Contains(t, res.EventHubAsyncOperation, "/operationStatuses/")
	assert.Contains(t, res.EventHubLocation, "/operationResults/")
	assert.Empty(t, out.Data.Overrides)

	// What the engine saves and a later run (of this or another replica) reads.
	raw, err := json.Marshal(out.Data)
	require.NoError(t, err)
	out.Data = instance.ProvisioningData{}
	require.NoError(t, json.Unmarshal(raw, &out.Data))
	assert.Equal(t, res, out.Data.Resources)

	for i := range 2 {
		out, wait, err = e.run(eventHubsStep(e), out, t0.Add(time.Duration(i+1)*15*time.Second))
		require.NoError(t, err)
		assert.Equal(t, 15*time.Second, wait)
		assert.Equal(t, "waiting for Azure to create the Event Hubs namespace: InProgress", out.LastError)
		assert.Equal(t, res.EventHubAsyncOperation, out.Data.Resources.EventHubAsyncOperation, "the same operation")
	}
	out = e.mustRun(t, eventHubsStep(e), out, t0.Add(time.Minute))
	assert.Empty(t, out.LastError)
	assert.Empty(t, out.Data.Resources.EventHubAsyncOperation, "the operation is over")
	assert.Empty(t, out.Data.Resources.EventHubLocation)
	conn := out.Secrets[overrides.SecretKey(provisioning.KafkaComponent, provisioning.KafkaPasswordKey)]
	assert.Contains(t, conn, "Endpoint=sb://"+name+".servicebus.windows.net/")

	objs := objects[azurestandin.Objects](t, e, "azure")
	assert.Equal(t, 1, objs.Calls["namespace.put"], "the runs followed the operation")
	assert.Equal(t, 3, objs.Calls["operation.status"])
	assert.Equal(t, 1, objs.NamespaceCreatesByName[name])
	require.Len(t, objs.ResourceGroups, 1)
	require.Len(t, objs.ResourceGroups[0].Namespaces, 1)
	assert.Equal(t, "Succeeded", objs.ResourceGroups[0].Namespaces[0].ProvisioningState)
}

// A creation Azure reports Failed fails the operation, naming Azure, its code and its message.
func TestProvisionEventHubs_AzureFailsTheCreation(t *testing.T) {
	e := newSystemsEnv(t, longRunningAzure(azurestandin.LongRunningFail))
	out := kyma1Azure()
	var err error
	var wait time.Duration
	for i := 0; ; i++ {
		require.Less(t, i, 5, "the creation did not end")
		out, wait, err = e.run(eventHubsStep(e), out, t0.Add(time.Duration(i)*15*time.Second))
		if err != nil {
			break
		}
		assert.Equal(t, 15*time.Second, wait)
	}
	assertFailed(t, wait, err, "Azure Event Hubs", "Provision Azure Event Hubs")
	assert.Contains(t, err.Error(), "Azure reports the namespace's creation Failed: "+azurestandin.CodeCreationFailed+": The sandbox failed")
	assert.Empty(t, out.Data.Overrides)
}

// A crash after Azure accepted the creation but before the operation kept its URLs (kill -9):
// the next run PUTs again (idempotent), Azure answers 409 while its operation runs, and the
// namespace once it is over; there is one namespace.
func TestProvisionEventHubs_AcceptedCreationLostInACrash(t *testing.T) {
	o := longRunningAzure(azurestandin.LongRunningAll)
	o.AzureLongRunningTime = 5 * time.Minute
	e := newSystemsEnv(t, o)
	op := startedAt(kyma1Azure(), "Provision Azure Event Hubs", t0)
	lost, _, err := e.run(eventHubsStep(e), op, t0)
	require.NoError(t, err)
	require.NotEmpty(t, lost.Data.Resources.EventHubAsyncOperation)

	out, wait, err := e.run(eventHubsStep(e), op, t0.Add(testPoll))
	assertRetrying(t, out, wait, err, "Azure Event Hubs")
	assert.Contains(t, out.LastError, "Azure still runs another operation")

	e.clock.Advance(5 * time.Minute)
	out = e.mustRun(t, eventHubsStep(e), op, t0.Add(30*time.Second))
	assert.Empty(t, out.Data.Resources.EventHubAsyncOperation)
	assert.NotEmpty(t, out.Secrets[overrides.SecretKey(provisioning.KafkaComponent, provisioning.KafkaPasswordKey)])
	_, name := provisioning.EventHubNames(testOpID)
	assert.Equal(t, 1, objects[azurestandin.Objects](t, e, "azure").NamespaceCreatesByName[name])
}
