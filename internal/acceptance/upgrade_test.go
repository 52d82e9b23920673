package acceptance

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Operators upgrade Kyma and the cluster through the runbook endpoints; the upgrades run the
// seed's steps and reach the reconciler and the provisioner.
func TestOperatorTriggeredUpgrades(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	id, other := uuid.NewString(), uuid.NewString()
	for i, inst := range []string{id, other} {
		ga := []string{"ga-up", "ga-up2"}[i]
		r := b.Put(bt.InstancePath(inst), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-up"), bt.SAPContext(ga, "sa-"+ga)))
		require.Equal(t, http.StatusAccepted, r.Status, r.String())
		b.WaitSucceeded(inst, r.Operation())
	}

	r := b.Do(http.MethodPost, "/upgrade/kyma", map[string]any{
		"targets": map[string]any{"include": []map[string]any{{"target": "all"}}, "exclude": []map[string]any{{"instanceID": other}}},
		"kyma":    map[string]any{"version": "2.21.0"},
	})
	require.Equal(t, http.StatusAccepted, r.Status, r.String())
	started := orchestrationOperations(t, b, r)
	require.Len(t, started, 1, "the excluded instance is not upgraded")
	assert.Equal(t, id, started[0].InstanceID)
	upgrade := started[0].OperationID
	waitOperation(t, b, upgrade, storage.StateSucceeded)

	steps, skipped := stepsOf(events(t, b, upgrade))
	assert.Equal(t, []string{"Upgrade_Kyma_Initialisation", "Provision EMS", "Deprovision Azure Event Hubs",
		"Overrides_From_Secrets_And_Config_Step", "Get_Kubeconfig", "Apply_Cluster_Configuration"}, steps)
	assert.Equal(t, []string{"Upgrade_Runtime"}, skipped, "Kyma 2.x is installed by the reconciler")
	inv := readInventory(t, b.SandboxURL)
	assert.Len(t, inv.SM.Bindings, 2, "the upgraded runtime keeps its EMS binding")
	for _, c := range inv.liveClusters() {
		if c.Metadata.InstanceID == id {
			assert.Equal(t, "2.21.0", c.KymaVersion)
			assert.Equal(t, 2, c.ConfigurationVersionsCreated)
		} else {
			assert.Equal(t, "2.20.0", c.KymaVersion)
		}
	}

	r = b.Do(http.MethodPost, "/upgrade/cluster", map[string]any{
		"targets": map[string]any{"include": []map[string]any{{"globalAccount": "ga-up2"}}}, "kubernetes": map[string]any{"kubernetesVersion": "1.32"},
	})
	require.Equal(t, http.StatusAccepted, r.Status, r.String())
	started = orchestrationOperations(t, b, r)
	require.Len(t, started, 1)
	assert.Equal(t, other, started[0].InstanceID)
	waitOperation(t, b, started[0].OperationID, storage.StateSucceeded)

	r = b.Do(http.MethodPost, "/upgrade/kyma", map[string]any{"targets": map[string]any{"include": []map[string]any{{"target": "all"}}}, "kyma": map[string]any{}})
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Contains(t, string(r.Body), "kyma.version")

	// The deprovisioning after the upgrade removes what the upgrade left, too.
	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status)
	b.WaitSucceeded(id, del.Operation())
	inv = readInventory(t, b.SandboxURL)
	assert.Len(t, inv.SM.Instances, 1, "only the other runtime's EMS remains")
	assert.Len(t, inv.liveClusters(), 1)
}

// orchestrationOperations waits until the orchestration created by r has finished and returns its operations.
func orchestrationOperations(t *testing.T, b *bt.Broker, r bt.Response) []dto.OperationResponse {
	t.Helper()
	var created dto.UpgradeResponse
	r.JSON(t, &created)
	ot.Wait(t, b, created.OrchestrationID, 30*time.Second, nil, nil)
	return ot.Operations(t, b, created.OrchestrationID)
}

func waitOperation(t *testing.T, b *bt.Broker, id string, want storage.OperationState) {
	t.Helper()
	// Generous: on a loaded machine an upgrade's steps queue behind other work.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		op, err := b.Store.Operations().GetOperation(t.Context(), id)
		require.NoError(t, err)
		if op.State == storage.StateSucceeded || op.State == storage.StateFailed {
			require.Equal(t, want, op.State, op.Description)
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("operation %s did not finish", id)
}
