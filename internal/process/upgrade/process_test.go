package upgrade

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const callTimeout = 5 * time.Second

func TestKymaProcess_Definition(t *testing.T) {
	p, err := KymaProcess(Deps{}, time.Hour, callTimeout)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeUpgradeKyma, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, map[string][]string{
		"weight_1":  {"Upgrade_Kyma_Initialisation"},
		"weight_2":  {"Provision EMS"},
		"weight_3":  {"Deprovision Azure Event Hubs"},
		"weight_4":  {"Overrides_From_Secrets_And_Config_Step"},
		"weight_10": {"Upgrade_Runtime", "Get_Kubeconfig", "Apply_Cluster_Configuration"},
	}, p.Stages())

	_, err = KymaProcess(Deps{}, 0, callTimeout)
	assert.Error(t, err, "a process needs a timeout")
}

func TestClusterProcess_Definition(t *testing.T) {
	p, err := ClusterProcess(Deps{}, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, instance.TypeUpgradeCluster, p.Type())
	assert.Equal(t, time.Hour, p.Timeout())
	assert.Equal(t, map[string][]string{
		"weight_1":  {"Upgrade_Cluster_Initialisation"},
		"weight_10": {"Upgrade_Cluster"},
	}, p.Stages())

	_, err = ClusterProcess(Deps{}, 0)
	assert.Error(t, err, "a process needs a timeout")
}

// engine is an engine on the env's store and clock running the Kyma and cluster upgrades.
func (e *env) engine(t *testing.T) *engine.Engine {
	t.Helper()
	kyma, err := KymaProcess(e.deps, time.Hour, callTimeout)
	require.NoError(t, err)
	cluster, err := ClusterProcess(e.deps, time.Hour)
	require.NoError(t, err)
	return steptest.Engine(t, e.store, e.clock, kyma, cluster)
}

// runToEnd inserts an operation of opType with data and runs the engine, moving the clock on by
// the poll interval between runs, until the operation has finished.
func (e *env) runToEnd(t *testing.T, eng *engine.Engine, opType string, data any) storage.Operation {
	t.Helper()
	raw := steptest.StartOperation(t, e.store, opType, testInstanceID, data, e.clock.Now())
	return steptest.RunToEnd(t, eng, e.store, e.clock, raw.ID, testPoll)
}

// answerUpgrades has the fake provisioner accept a runtime upgrade and finish it at the next poll.
func (e *env) answerUpgrades() {
	e.prov.upgrade = accepting[gqlschema.UpgradeRuntimeInput]("pop-up")
	e.prov.status = statuses("pop-up", gqlschema.OperationStateInProgress, gqlschema.OperationStateSucceeded)
	e.prov.runtimeStatus = withKubeconfig(testKubeconfig)
}

// With every external system disabled, a Kyma 1.x upgrade goes through the provisioner and the
// other systems' steps are skipped.
func TestKymaProcess_SystemsDisabled(t *testing.T) {
	e := newEnv(t)
	e.answerUpgrades()
	op := e.runToEnd(t, e.engine(t), instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: "1.24.9"})

	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"weight_1", "weight_2", "weight_3", "weight_4", "weight_10"}, op.Progress.FinishedStages)
	assert.Equal(t, []string{
		"Upgrade_Kyma_Initialisation:succeeded",
		"Provision EMS:skipped",
		"Deprovision Azure Event Hubs:skipped",
		"Overrides_From_Secrets_And_Config_Step:succeeded",
		// Two polls finding the upgrade in progress, the second identical: one event.
		"Upgrade_Runtime:retrying",
		"Upgrade_Runtime:succeeded",
		"Get_Kubeconfig:skipped",
		"Apply_Cluster_Configuration:skipped",
	}, steptest.Trace(t, e.store, op.ID))
	assert.Equal(t, []string{"UpgradeRuntime", "RuntimeOperationStatus", "RuntimeOperationStatus"}, e.prov.methods())
	assert.Equal(t, "1.24.9", e.prov.CallsTo("UpgradeRuntime")[0].Upgrade.KymaConfig.Version)
	assert.Equal(t, grafanaSecret, op.Secrets[grafanaKey], "the copied secret is stored encrypted with the operation")
	assert.NotContains(t, string(op.Data), grafanaSecret)
}

// Kyma 2.x goes through the reconciler, 1.x (or 2.x without a reconciler) through Upgrade_Runtime;
// steps of disabled systems are skipped.
func TestKymaProcess_Conditions(t *testing.T) {
	for name, tc := range map[string]struct {
		version string
		sandbox bool
		disable func(*Deps)
		skipped []string
	}{
		"Kyma 2 through the reconciler": {
			version: "2.21.0", sandbox: true,
			skipped: []string{"Upgrade_Runtime"},
		},
		"Kyma 1 through the provisioner": {
			version: "1.24.9", sandbox: true,
			skipped: []string{"Deprovision Azure Event Hubs", "Get_Kubeconfig", "Apply_Cluster_Configuration"},
		},
		"Kyma 2 without a reconciler": {
			version: "2.21.0", sandbox: true, disable: func(d *Deps) { d.Systems.Reconciler = nil },
			skipped: []string{"Get_Kubeconfig", "Apply_Cluster_Configuration"},
		},
		"without Service Manager and Event Hubs": {
			version: "2.21.0", sandbox: true, disable: func(d *Deps) { d.Systems.ServiceManager, d.Systems.EventHubs = nil, nil },
			skipped: []string{"Provision EMS", "Deprovision Azure Event Hubs", "Upgrade_Runtime"},
		},
		"Kyma 2 with every system disabled": {
			version: "2.21.0",
			skipped: []string{"Provision EMS", "Deprovision Azure Event Hubs", "Get_Kubeconfig", "Apply_Cluster_Configuration"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var e *env
			if tc.sandbox {
				e = newSandboxEnv(t, standins.Options{})
			} else {
				e = newEnv(t)
			}
			if tc.disable != nil {
				tc.disable(&e.deps)
			}
			e.answerUpgrades()
			op := e.runToEnd(t, e.engine(t), instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: tc.version})
			require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
			assert.ElementsMatch(t, tc.skipped, steptest.Skipped(op))
		})
	}
}

// TestKymaProcess_FromKyma1WithEventHubs runs two upgrades on the engine with every system in the
// sandbox: a Kyma 1.x runtime with Azure Event Hubs moves to 2.x (EMS instead of Event Hubs,
// installed by the reconciler), then to a newer 2.x, which keeps what the first upgrade made.
func TestKymaProcess_FromKyma1WithEventHubs(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{})
	e.deps.Overrides = testDefaults(t)
	e.answerUpgrades()
	ctx := context.Background()

	// The runtime's latest provisioning: Kyma 1.x with an Event Hubs namespace for Kafka.
	rg, ns := provisioning.EventHubNames("op-provisioning")
	_, err := e.sb.Systems.EventHubs.EnsureNamespace(ctx, eventhubs.NamespaceRequest{ResourceGroup: rg, Name: ns, Region: "westeurope"})
	require.NoError(t, err)
	data, secrets := provisioningData("1.24.8")
	data.Resources.EventHubResourceGroup, data.Resources.EventHubNamespace = rg, ns
	data.Overrides.Set(&secrets, provisioning.KafkaComponent,
		overrides.Entry{Key: provisioning.KafkaBrokersKey, Value: ns + ".servicebus.windows.net:9093"},
		overrides.Entry{Key: provisioning.KafkaPasswordKey, Value: "Endpoint=sb://x;SharedAccessKey=k", Secret: true})
	insertOp(t, e.store, instance.TypeProvision, testInstanceID, data, secrets, storage.StateSucceeded, t0.Add(-time.Hour))

	eng := e.engine(t)
	first := e.runToEnd(t, eng, instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: "2.21.0"})
	require.Equal(t, storage.StateSucceeded, first.State, first.LastError)
	assert.Equal(t, []string{
		"Upgrade_Kyma_Initialisation:succeeded",
		"Provision EMS:succeeded",
		"Deprovision Azure Event Hubs:succeeded",
		"Overrides_From_Secrets_And_Config_Step:succeeded",
		"Upgrade_Runtime:skipped",
		"Get_Kubeconfig:succeeded",
		"Apply_Cluster_Configuration:retrying",
		"Apply_Cluster_Configuration:succeeded",
	}, steptest.Trace(t, e.store, first.ID))
	assert.Empty(t, first.Progress.ExecutedButNotCompleted)
	assert.Equal(t, []string{"RuntimeConfiguration"}, e.prov.methods(), "only the kubeconfig is read from the provisioner")

	// What the systems have: EMS, no Event Hubs, the cluster with the new Kyma and EMS eventing.
	sm := smObjects(t, e)
	require.Len(t, sm.Instances, 1)
	require.Len(t, sm.Bindings, 1)
	assert.Empty(t, azureObjects(t, e).ResourceGroups)
	rec := reconcilerObjects(t, e)
	require.Len(t, rec.Clusters, 1)
	c := rec.Clusters[0]
	assert.Equal(t, "2.21.0", c.KymaVersion)
	assert.Equal(t, "ready", c.Status)
	components := map[string]bool{}
	for _, comp := range c.Components {
		components[comp.Component] = true
	}
	assert.Equal(t, map[string]bool{"istio": true, "serverless": true, "monitoring": true, "eventing": true}, components,
		"EMS eventing instead of the Kafka component")

	// What the operation stored: the new resources, secrets only encrypted.
	var stored instance.UpgradeKymaData
	require.NoError(t, jsonUnmarshal(first.Data, &stored))
	assert.Equal(t, sm.Instances[0].ID, stored.Resources.EMSInstanceID)
	assert.Equal(t, sm.Bindings[0].ID, stored.Resources.EMSBindingID)
	assert.Empty(t, stored.Resources.EventHubResourceGroup)
	assert.Equal(t, testRuntimeID, stored.Resources.ReconcilerClusterID)
	assert.NotContains(t, stored.Overrides, provisioning.KafkaComponent)
	assert.Equal(t, testKubeconfig, first.Secrets[provisioning.KubeconfigSecret])
	assert.NotEmpty(t, first.Secrets[emsCredentials])
	for _, secret := range []string{grafanaSecret, testKubeconfig, first.Secrets[emsCredentials]} {
		assert.NotContains(t, string(first.Data), secret)
	}

	// The next upgrade starts from the first one's result: no new EMS binding, nothing to delete.
	e.clock.Advance(time.Minute)
	second := e.runToEnd(t, eng, instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: "2.22.0"})
	require.Equal(t, storage.StateSucceeded, second.State, second.LastError)
	var next instance.UpgradeKymaData
	require.NoError(t, jsonUnmarshal(second.Data, &next))
	assert.Equal(t, first.ID, next.ProvisioningOperationID)
	assert.Equal(t, stored.Resources, next.Resources)
	assert.Equal(t, first.Secrets[emsCredentials], second.Secrets[emsCredentials])
	sm = smObjects(t, e)
	assert.Len(t, sm.Instances, 1)
	assert.Len(t, sm.Bindings, 1)
	c = reconcilerObjects(t, e).Clusters[0]
	assert.Equal(t, "2.22.0", c.KymaVersion)
	assert.Equal(t, 2, c.ConfigurationVersionsCreated)
	assert.Equal(t, 1, c.Creations)
}

func TestKymaProcess_FailureNamesSystemAndStep(t *testing.T) {
	e := newSandboxEnv(t, standins.Options{FailingComponents: []string{"monitoring"}})
	e.answerUpgrades()
	op := e.runToEnd(t, e.engine(t), instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: "2.21.0"})

	require.Equal(t, storage.StateFailed, op.State)
	assert.Equal(t, "Reconciler: installing Kyma failed (configuration version 1) (step Apply_Cluster_Configuration)", op.LastError)
	trace := steptest.Trace(t, e.store, op.ID)
	assert.Equal(t, "Apply_Cluster_Configuration:failed", trace[len(trace)-1])
}

func TestClusterProcess_Runs(t *testing.T) {
	e := newEnv(t)
	e.prov.shoot = accepting[gqlschema.UpgradeShootInput]("pop-uc")
	e.prov.status = statuses("pop-uc", gqlschema.OperationStateSucceeded)
	op := e.runToEnd(t, e.engine(t), instance.TypeUpgradeCluster, instance.UpgradeClusterData{KubernetesVersion: "1.32.1"})

	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"weight_1", "weight_10"}, op.Progress.FinishedStages)
	assert.Equal(t, []string{
		"Upgrade_Cluster_Initialisation:succeeded",
		"Upgrade_Cluster:retrying",
		"Upgrade_Cluster:succeeded",
	}, steptest.Trace(t, e.store, op.ID))
	var data instance.UpgradeClusterData
	require.NoError(t, jsonUnmarshal(op.Data, &data))
	assert.Equal(t, instance.UpgradeClusterData{KubernetesVersion: "1.32.1", GlobalAccountID: testGA, RuntimeID: testRuntimeID, ProvisionerOperationID: "pop-uc"}, data)
	assert.Equal(t, []string{"UpgradeShoot", "RuntimeOperationStatus"}, e.prov.methods())
	assert.Equal(t, testRuntimeID, e.prov.Calls()[0].ID)
}

func TestClusterProcess_RejectedUpgradeFails(t *testing.T) {
	e := newEnv(t)
	e.prov.shoot = func(string, string, gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
		return nil, apperr.BadRequest("gardenerConfig.kubernetesVersion", "downgrade to %q", "1.20")
	}
	op := e.runToEnd(t, e.engine(t), instance.TypeUpgradeCluster, instance.UpgradeClusterData{KubernetesVersion: "1.20"})

	require.Equal(t, storage.StateFailed, op.State)
	assert.Contains(t, op.LastError, "the provisioner rejected the cluster upgrade")
	trace := steptest.Trace(t, e.store, op.ID)
	assert.Equal(t, "Upgrade_Cluster:failed", trace[len(trace)-1])
}
