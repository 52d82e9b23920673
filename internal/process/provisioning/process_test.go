package provisioning_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testLimits = provisioning.Limits{CallTimeout: callTimeout, ReconcileTimeout: time.Hour}

func TestProcess_Definition(t *testing.T) {
	p, err := provisioning.Process(provisioning.Deps{}, time.Hour, testLimits)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeProvision, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, map[string][]string{
		provisioning.StageCreateRuntime: {
			"Initialization", "Resolve_Target_Secret", "AVS_Create_Internal_Eval_Step", "IAS_Registration",
			"EDP_Registration", "Provision Azure Event Hubs", "Provision EMS", "Overrides_From_Secrets_And_Config_Step",
			"ServiceManagerOverrides", "Create_Runtime",
		},
		provisioning.StageCheckRuntime: {"Check_Runtime"},
		provisioning.StageCreateKyma:   {"Get_Kubeconfig", "Create_Cluster_Configuration", "Check_Cluster_Configuration"},
		provisioning.StagePostActions:  {"AVS_Create_External_Eval_Step", "AVS_Tags", "IAS_Type"},
	}, p.Stages())

	_, err = provisioning.Process(provisioning.Deps{}, 0, testLimits)
	assert.Error(t, err, "a process needs a timeout")
}

func TestKyma2(t *testing.T) {
	for v, want := range map[string]bool{"2.20.0": true, "v2.0.1": true, "3.0": true, "1.24.8": false, "v1.9": false, "main-abc123": true, "": true} {
		assert.Equal(t, want, provisioning.Kyma2(v), v)
	}
}

// runProcess runs a provisioning of data on the engine (real SQLite store, the env's clock),
// advancing the clock by the poll interval while the operation waits, until it finishes.
func runProcess(t *testing.T, e *env, data instance.ProvisioningData) storage.Operation {
	t.Helper()
	p, err := provisioning.Process(e.deps, time.Hour, testLimits)
	require.NoError(t, err)
	eng := steptest.Engine(t, e.store, e.clock, p)
	raw := steptest.StartOperation(t, e.store, instance.TypeProvision, testInstanceID, data, e.clock.Now())
	return steptest.RunToEnd(t, eng, e.store, e.clock, raw.ID, testPoll)
}

// TestProcess_SystemsDisabled runs the process with every external system disabled: their steps
// are skipped, the provisioner creates the runtime and installs Kyma.
func TestProcess_SystemsDisabled(t *testing.T) {
	e := newEnv(t)
	polls := 0
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) {
		polls++
		if polls == 1 {
			return opStatus("pop-1", gqlschema.OperationStateInProgress), nil
		}
		return opStatus("pop-1", gqlschema.OperationStateSucceeded), nil
	}
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", "")

	op := runProcess(t, e, provData("gcp", "europe-west3"))
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{provisioning.StageCreateRuntime, provisioning.StageCheckRuntime, provisioning.StageCreateKyma, provisioning.StagePostActions},
		op.Progress.FinishedStages)
	assert.Equal(t, []string{
		"Initialization:succeeded",
		"Resolve_Target_Secret:succeeded",
		"AVS_Create_Internal_Eval_Step:skipped", "IAS_Registration:skipped", "EDP_Registration:skipped",
		"Provision Azure Event Hubs:skipped", "Provision EMS:skipped",
		"Overrides_From_Secrets_And_Config_Step:succeeded",
		"ServiceManagerOverrides:skipped",
		"Create_Runtime:succeeded",
		"Check_Runtime:retrying",
		"Check_Runtime:succeeded",
		"Get_Kubeconfig:skipped", "Create_Cluster_Configuration:skipped", "Check_Cluster_Configuration:skipped",
		"AVS_Create_External_Eval_Step:skipped", "AVS_Tags:skipped", "IAS_Type:skipped",
	}, steptest.Trace(t, e.store, op.ID))

	var methods []string
	for _, c := range e.prov.Calls() {
		methods = append(methods, c.Method)
	}
	assert.Equal(t, []string{"ProvisionRuntime", "RuntimeOperationStatus", "RuntimeOperationStatus", "RuntimeConfiguration"}, methods)
	req := e.prov.Calls()[0].Provision
	assert.Equal(t, op.ID, req.RuntimeInput.Labels[provisioning.IdempotencyLabel])
	assert.Equal(t, "kyma-gcp", req.ClusterConfig.GardenerConfig.TargetSecret)
	require.NotNil(t, req.KymaConfig, "without a reconciler the provisioner installs Kyma")
	assert.Equal(t, "2.20.0", req.KymaConfig.Version)

	inst := getInstance(t, e.store)
	assert.Equal(t, "rt-1", inst.RuntimeID)
	assert.Equal(t, "https://dash.example/?kubeconfigID="+testInstanceID, inst.DashboardURL)
}

// Check_Runtime, in the run of Create_Runtime, takes the provisioner's answer to the request
// (its operation just started) rather than reading the operation again: the provisioner's
// status is read once, after the provisioner finished (its wake, or the poll).
func TestProcess_CheckRuntimeTakesTheRequestsAnswer(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	var finished atomic.Bool
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) {
		if finished.Load() {
			return opStatus("pop-1", gqlschema.OperationStateSucceeded), nil
		}
		return opStatus("pop-1", gqlschema.OperationStateInProgress), nil
	}
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", "")
	p, err := provisioning.Process(e.deps, time.Hour, testLimits)
	require.NoError(t, err)
	eng := steptest.Engine(t, e.store, e.clock, p)
	raw := steptest.StartOperation(t, e.store, instance.TypeProvision, testInstanceID, provData("gcp", "europe-west3"), e.clock.Now())

	op := steptest.RunRounds(t, eng, e.store, e.clock, raw.ID, 1, testPoll)
	require.True(t, op.State.Active())
	assert.Empty(t, e.prov.CallsTo("RuntimeOperationStatus"), "the request's answer said in progress")
	finished.Store(true)
	op = steptest.RunToEnd(t, eng, e.store, e.clock, raw.ID, testPoll)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Len(t, e.prov.CallsTo("RuntimeOperationStatus"), 1)
}

// TestProcess_AllSystems provisions a Kyma 2.x runtime with every external system (the sandbox,
// real clients): each creates what the runtime needs and the reconciler installs Kyma.
func TestProcess_AllSystems(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", testKubeconfig)
	registerInDirector(t, e, map[string]any{director.ConsoleURLLabel: consoleURL})
	reads := &countingInstances{Instances: e.deps.Instances}
	e.deps.Instances = reads

	op := runProcess(t, e, provData("azure", "westeurope"))
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"Provision Azure Event Hubs"}, steptest.Skipped(op), "Kyma 2.x eventing needs no Event Hubs")
	assert.Zero(t, reads.gets.Load(), "AVS_Create_External_Eval_Step took the dashboard URL Check_Runtime stored in the same run")
	assert.Empty(t, op.Progress.ExecutedButNotCompleted)

	var data instance.ProvisioningData
	require.NoError(t, json.Unmarshal(op.Data, &data))
	res := data.Resources
	assert.NotZero(t, res.AVSInternalEvaluationID)
	assert.NotZero(t, res.AVSExternalEvaluationID)
	assert.True(t, res.AVSTagged)
	assert.True(t, res.IASOIDCConfigured)
	assert.Equal(t, testSA, res.EDPSubAccountID)
	assert.NotEmpty(t, res.EMSBindingID)
	assert.Equal(t, "rt-1", res.ReconcilerClusterID)
	assert.Equal(t, "c-1a2b3c.kyma.example", data.ShootDomain)

	// What exists in the systems: one of each.
	avsObjs := objects[avsstandin.Objects](t, e, "avs")
	assert.Len(t, evaluation(t, avsObjs, "kyma-internal-"+testInstanceID).Tags, 3)
	assert.Equal(t, consoleURL, evaluation(t, avsObjs, externalEvalName).URL)
	sp := serviceProvider(t, objects[iasstandin.Objects](t, e, "ias"))
	assert.Equal(t, []string{"https://grafana.c-1a2b3c.kyma.example/login/generic_oauth"}, sp.RedirectURIs)
	assert.Equal(t, 1, sp.Secrets)
	assert.Len(t, objects[edpstandin.Objects](t, e, "edp").DataTenants, 1)
	smObjs := objects[smstandin.Objects](t, e, "servicemanager")
	assert.Len(t, smObjs.Instances, 1)
	assert.Len(t, smObjs.Bindings, 1)
	assert.Empty(t, objects[azurestandin.Objects](t, e, "azure").ResourceGroups)
	c := cluster(t, e)
	assert.Equal(t, reconcilerstandin.StatusReady, c.Status)
	assert.Equal(t, len(testKubeconfig), c.Kubeconfig.Length)
	components := map[string][]reconcilerstandin.Configuration{}
	for _, comp := range c.Components {
		components[comp.Component] = comp.Configuration
	}
	assert.Contains(t, components[provisioning.MonitoringComponent], reconcilerstandin.Configuration{Key: provisioning.GrafanaClientSecretK, Value: reconcilerstandin.Masked, Secret: true})
	assert.Contains(t, components[provisioning.EventingComponent], reconcilerstandin.Configuration{Key: provisioning.EMSCredentialsKey, Value: reconcilerstandin.Masked, Secret: true})
	assert.Contains(t, components[provisioning.SMProxyComponent], reconcilerstandin.Configuration{Key: provisioning.SMClientSecretKey, Value: reconcilerstandin.Masked, Secret: true})
	assert.Contains(t, components["istio"], reconcilerstandin.Configuration{Key: "global.disableLegacyConnectivity", Value: "true"}, "the shipped defaults")

	// The provisioner only created the cluster, with the resolved account.
	req := e.prov.Calls()[0].Provision
	assert.Nil(t, req.KymaConfig)
	assert.Equal(t, "kyma-azure", req.ClusterConfig.GardenerConfig.TargetSecret)
	assert.Equal(t, consoleURL, getInstance(t, e.store).DashboardURL)

	// Secret values are stored encrypted, never in the operation's data.
	assert.Equal(t, testKubeconfig, op.Secrets[provisioning.KubeconfigSecret])
	for key, value := range op.Secrets {
		assert.NotContains(t, string(op.Data), value, "secret %s is in the operation's data", key)
	}
	assert.NotEmpty(t, op.Secrets[overrides.SecretKey(provisioning.MonitoringComponent, provisioning.GrafanaClientSecretK)])
}

// TestProcess_Kyma1OnAzure provisions a Kyma 1.x runtime: Event Hubs give eventing its Kafka, the
// provisioner installs Kyma with every collected override and the reconciler is not involved.
func TestProcess_Kyma1OnAzure(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", testKubeconfig)
	registerInDirector(t, e, map[string]any{director.ConsoleURLLabel: consoleURL})
	data := provData("azure", "westeurope")
	data.Parameters.KymaVersion = "1.24.8"

	op := runProcess(t, e, data)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.ElementsMatch(t, []string{"Get_Kubeconfig", "Create_Cluster_Configuration", "Check_Cluster_Configuration"}, steptest.Skipped(op))
	assert.Empty(t, objects[reconcilerstandin.Objects](t, e, "reconciler").Clusters)
	groups := objects[azurestandin.Objects](t, e, "azure").ResourceGroups
	require.Len(t, groups, 1)
	assert.Len(t, groups[0].Namespaces, 1)

	k := e.prov.Calls()[0].Provision.KymaConfig
	require.NotNil(t, k)
	assert.Equal(t, "1.24.8", k.Version)
	var names []string
	for _, c := range k.Components {
		names = append(names, c.Component)
		if c.Component == provisioning.KafkaComponent {
			var keys []string
			for _, entry := range c.Configuration {
				keys = append(keys, entry.Key)
				if entry.Key == provisioning.KafkaPasswordKey {
					assert.True(t, strings.HasPrefix(entry.Value, "Endpoint=sb://"), "the resolved connection string")
					require.NotNil(t, entry.Secret)
					assert.True(t, *entry.Secret)
				}
			}
			assert.Contains(t, keys, provisioning.KafkaPasswordKey)
		}
	}
	assert.Subset(t, names, []string{"istio", "serverless", provisioning.KafkaComponent, provisioning.EventingComponent, provisioning.MonitoringComponent, provisioning.SMProxyComponent})
	for key, value := range op.Secrets {
		assert.NotContains(t, string(op.Data), value, "secret %s is in the operation's data", key)
	}
}

// Azure creates the Event Hubs namespace asynchronously and the broker restarts meanwhile: the
// engine saved the operation's URLs with the step's retry, and a new engine on the same store
// follows the same operation to the end, without another PUT.
func TestProcess_Kyma1OnAzure_LongRunningEventHubsAcrossARestart(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{AzureLongRunning: azurestandin.LongRunningAll, AzureLongRunningPolls: 2,
		AzureRetryAfter: testPoll, AzureLongRunningTime: time.Hour})
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	e.prov.status = steptest.StatusReturning(opStatus("pop-1", gqlschema.OperationStateSucceeded), nil)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", testKubeconfig)
	registerInDirector(t, e, map[string]any{director.ConsoleURLLabel: consoleURL})
	data := provData("azure", "westeurope")
	data.Parameters.KymaVersion = "1.24.8"
	p, err := provisioning.Process(e.deps, time.Hour, testLimits)
	require.NoError(t, err)
	raw := steptest.StartOperation(t, e.store, instance.TypeProvision, testInstanceID, data, e.clock.Now())

	first := steptest.Engine(t, e.store, e.clock, p)
	op := steptest.RunRounds(t, first, e.store, e.clock, raw.ID, 1, testPoll)
	require.True(t, op.State.Active())
	var saved instance.ProvisioningData
	require.NoError(t, json.Unmarshal(op.Data, &saved))
	require.NotEmpty(t, saved.Resources.EventHubAsyncOperation, "the operation's URL is in the stored operation")

	// The first engine is gone (kill -9); another one takes the operation from the store.
	second := steptest.Engine(t, e.store, e.clock, p)
	op = steptest.RunToEnd(t, second, e.store, e.clock, raw.ID, testPoll)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Contains(t, steptest.Trace(t, e.store, op.ID), "Provision Azure Event Hubs:retrying")
	objs := objects[azurestandin.Objects](t, e, "azure")
	assert.Equal(t, 1, objs.Calls["namespace.put"])
	assert.Equal(t, 3, objs.Calls["operation.status"], "the polls followed the saved operation")
	var final instance.ProvisioningData
	require.NoError(t, json.Unmarshal(op.Data, &final))
	assert.Empty(t, final.Resources.EventHubAsyncOperation)
	assert.Contains(t, string(op.Data), provisioning.KafkaComponent)
}

// countingInstances counts the instance reads of the steps.
type countingInstances struct {
	storage.Instances
	gets atomic.Int32
}

func (c *countingInstances) GetInstance(ctx context.Context, id string) (storage.Instance, error) {
	c.gets.Add(1)
	return c.Instances.GetInstance(ctx, id)
}
