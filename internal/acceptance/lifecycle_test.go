package acceptance

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The seed's provisioning steps, stage by stage, as a Kyma 2.x runtime on AWS runs them.
var kyma2Steps = []string{
	"Initialization", "Resolve_Target_Secret", "AVS_Create_Internal_Eval_Step", "IAS_Registration", "EDP_Registration",
	"Provision EMS", "Overrides_From_Secrets_And_Config_Step", "ServiceManagerOverrides", "Create_Runtime",
	"Check_Runtime",
	"Get_Kubeconfig", "Create_Cluster_Configuration", "Check_Cluster_Configuration",
	"AVS_Create_External_Eval_Step", "AVS_Tags", "IAS_Type",
}

var deprovisionSteps = []string{
	"Deprovision_Initialization", "Deprovision Azure Event Hubs", "Deprovision EMS", "De-provision_AVS_Evaluations",
	"IAS_Deregistration", "EDP_Deregistration", "Deregister_Cluster", "Remove_Runtime",
}

func TestProvisionAndDeprovisionThroughEveryExternalSystem(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	id := uuid.NewString()
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-acceptance"), bt.SAPContext("ga-acc", "sa-acc")))
	require.Equal(t, http.StatusAccepted, prov.Status, prov.String())
	b.WaitSucceeded(id, prov.Operation())

	started, skipped := stepsOf(events(t, b, prov.Operation()))
	assert.Equal(t, kyma2Steps, started, "the seed's steps, in order")
	assert.Equal(t, []string{"Provision Azure Event Hubs"}, skipped, "Event Hubs are for Kyma 1.x on Azure only")

	inv := readInventory(t, b.SandboxURL)
	evals := inv.evaluations()
	require.Len(t, evals, 2, "one internal and one external evaluation")
	assert.ElementsMatch(t, []string{provisioning.InternalEvaluationName(id), provisioning.ExternalEvaluationName(id)}, []string{evals[0].Name, evals[1].Name})
	assert.Equal(t, 1, maxCount(inv.AVS.CreatesByName))
	var internal = evals[0]
	if internal.Name != provisioning.InternalEvaluationName(id) {
		internal = evals[1]
	}
	assert.Len(t, internal.Tags, 3, "AVS_Tags: runtime, instance and shoot")
	require.Len(t, inv.IAS.ServiceProviders, 1)
	assert.Equal(t, provisioning.ServiceProviderName(id), inv.IAS.ServiceProviders[0].Name)
	require.Len(t, inv.EDP.DataTenants, 1)
	assert.Equal(t, "sa-acc", inv.EDP.DataTenants[0].Name)
	require.Len(t, inv.SM.Instances, 1, "one EMS instance")
	require.Len(t, inv.SM.Bindings, 1, "one EMS binding")
	require.Len(t, inv.liveClusters(), 1, "one cluster configuration")
	cluster := inv.liveClusters()[0]
	assert.Equal(t, "ready", cluster.Status)
	assert.Equal(t, 1, cluster.ConfigurationVersionsCreated)
	assert.Equal(t, 1, inv.directorRuntimes(), "the provisioner registered the runtime")
	var eventing []string
	for _, c := range cluster.Components {
		if c.Component == provisioning.EventingComponent {
			for _, e := range c.Configuration {
				eventing = append(eventing, e.Key)
				if e.Key == provisioning.EMSCredentialsKey {
					assert.True(t, e.Secret, "EMS credentials are marked secret")
				}
			}
		}
	}
	assert.Contains(t, eventing, provisioning.EMSCredentialsKey, "the EMS binding reached the reconciler")

	ops := b.Operations(id)
	require.NotEmpty(t, ops)
	assert.NotContains(t, string(ops[0].Data), "clientsecret", "secret override values stay out of the operation's data")

	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status, del.String())
	b.WaitSucceeded(id, del.Operation())
	started, _ = stepsOf(events(t, b, del.Operation()))
	assert.Equal(t, deprovisionSteps, started, "the seed's deprovisioning steps, by weight")
	deprov, err := b.Store.Operations().GetOperation(context.Background(), del.Operation())
	require.NoError(t, err)
	assert.Empty(t, deprov.Progress.ExecutedButNotCompleted, "every cleanup completed")

	inv = readInventory(t, b.SandboxURL)
	assert.Empty(t, inv.evaluations(), "AVS evaluations removed")
	assert.Empty(t, inv.IAS.ServiceProviders, "IAS service provider removed")
	assert.Empty(t, inv.EDP.DataTenants, "EDP registration removed")
	assert.Empty(t, inv.SM.Instances, "EMS instance removed")
	assert.Empty(t, inv.SM.Bindings, "EMS binding removed")
	assert.Empty(t, inv.liveClusters(), "cluster deregistered from the reconciler")
	assert.Equal(t, 0, inv.directorRuntimes(), "runtime unregistered from the Director")

	metrics := b.Get("/metrics", bt.WithoutAuth(), bt.WithoutAPIVersion()).String()
	for _, system := range []string{"avs", "edp", "ias", "servicemanager", "reconciler", "director"} {
		assert.Regexp(t, `keb_external_requests_total\{method="(GET|POST|PUT|PATCH|DELETE)",outcome="2\d\d",system="`+system+`"\} [1-9]`, metrics, "the calls to %s are counted", system)
		assert.Contains(t, metrics, `keb_external_request_duration_seconds_count{system="`+system+`"}`)
	}
}

// A Kyma 1.x runtime on Azure gets an Event Hubs namespace whose credentials go, marked secret,
// to the provisioner, which installs Kyma itself. Azure creates the namespace asynchronously (202
// Accepted), as ARM may.
func TestKyma1OnAzureUsesEventHubsAndTheProvisioner(t *testing.T) {
	b := bt.Start(t, bt.Options{Sandbox: standins.Options{AzureLongRunning: azurestandin.LongRunningAll, AzureRetryAfter: time.Second}})
	id := uuid.NewString()
	params := map[string]any{"name": "rt-kyma1", "region": "westeurope", "kymaVersion": "1.24.8"}
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AzurePlanID, params, bt.SAPContext("ga-k1", "sa-k1")))
	require.Equal(t, http.StatusAccepted, prov.Status, prov.String())
	b.WaitSucceeded(id, prov.Operation())

	started, skipped := stepsOf(events(t, b, prov.Operation()))
	assert.Contains(t, started, "Provision Azure Event Hubs")
	assert.ElementsMatch(t, []string{"Get_Kubeconfig", "Create_Cluster_Configuration", "Check_Cluster_Configuration"}, skipped,
		"the provisioner installs Kyma 1.x")

	inv := readInventory(t, b.SandboxURL)
	require.Len(t, inv.Azure.ResourceGroups, 1)
	require.Len(t, inv.Azure.ResourceGroups[0].Namespaces, 1)
	assert.Equal(t, 1, maxCount(inv.Azure.NamespaceCreatesByName))
	assert.Equal(t, 1, inv.Azure.Calls["namespace.put"], "the step followed Azure's operation")
	assert.Equal(t, 3, inv.Azure.Calls["operation.status"], "InProgress twice, then Succeeded")
	assert.Empty(t, inv.Reconciler.Clusters)

	rt, err := b.Store.Runtimes().ListRuntimes(context.Background(), storage.RuntimeFilter{})
	require.NoError(t, err)
	require.Len(t, rt.Items, 1)
	assert.Contains(t, string(rt.Items[0].Config), "knative-eventing-kafka", "the Kafka overrides reached the provisioner")
	assert.NotContains(t, string(rt.Items[0].Config), "SharedAccessKey", "the connection string is stored encrypted, not in the config")

	del := b.Delete(bt.DeprovisionPath(id, bt.AzurePlanID))
	require.Equal(t, http.StatusAccepted, del.Status)
	b.WaitSucceeded(id, del.Operation())
	inv = readInventory(t, b.SandboxURL)
	assert.Empty(t, inv.Azure.ResourceGroups, "the Event Hubs resource group is deleted")
}
