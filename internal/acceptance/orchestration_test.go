package acceptance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// The broker is killed (SIGKILL) twice while an orchestration's upgrades run: the restarted
// scheduler continues where the rows say, and every runtime is upgraded exactly once (one
// engine operation each, one new configuration at the reconciler).
func TestOrchestrationSurvivesKills(t *testing.T) {
	const n, workers = 16, 3
	c := onDefaults(t, "APP_ORCHESTRATION_POLL_INTERVAL=50ms", "APP_ORCHESTRATION_LOCK_RETRY_INTERVAL=100ms")
	c.start()
	b := c.client()
	ids, ops := provisionMany(t, b, n, "orch")
	waitAll(t, b, ids, ops, 5*time.Minute)

	// Each upgrade's reconciler calls take a while, so that upgrades are running when the broker
	// is killed: without it the engine takes an upgrade through in milliseconds, and the
	// kill points (below) rarely found one running.
	c.setFaults("reconciler", sandbox.Faults{Latency: 150 * time.Millisecond})
	id := ot.UpgradeKyma(t, b, "2.21.0", workers, map[string]any{"target": "all"})
	check := func(st dto.StatusResponse) {
		assert.LessOrEqual(t, st.OperationStats[dto.InProgress], workers, "%v", st.OperationStats)
	}
	// Each kill comes once enough upgrades succeeded while one is running. An orchestration that
	// finishes before a kill point is logged rather than waited for until the timeout (the
	// restarted broker may go through the rest between two polls); the first kill must happen.
	kills := 0
	for _, done := range []int{3, 9} {
		at := ot.Wait(t, b, id, 2*time.Minute, func(st dto.StatusResponse) bool {
			return (st.OperationStats[dto.Succeeded] >= done && st.OperationStats[dto.InProgress] > 0) || ot.Finished(st.State)
		}, check)
		if ot.Finished(at.State) {
			t.Logf("the orchestration finished before the kill point at %d succeeded: %v", done, at.OperationStats)
			break
		}
		c.kill()
		kills++
		t.Logf("killed the broker at %v", at.OperationStats)
		c.start()
	}
	require.Positive(t, kills, "the broker was never killed while upgrades remained")
	st := ot.Wait(t, b, id, 5*time.Minute, nil, check)
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	assert.Equal(t, n, st.OperationStats[dto.Succeeded])

	store := c.openStore()
	assert.LessOrEqual(t, ot.MaxOverlap(t, store, ot.Operations(t, b, id)), workers)
	ups := ot.UpgradesOf(t, store, ids)
	assert.Len(t, ups, n)
	for inst, count := range ups {
		assert.Equal(t, 1, count, "instance %s upgraded once", inst)
	}
	clusters := readInventory(t, c.sandboxURL).liveClusters()
	require.Len(t, clusters, n)
	for _, cl := range clusters {
		assert.Equal(t, "2.21.0", cl.KymaVersion, cl.RuntimeID)
		assert.Equal(t, 2, cl.ConfigurationVersionsCreated, "cluster %s: provisioning's configuration and one upgrade", cl.RuntimeID)
	}
}
