package acceptance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
)

// The broker is killed (SIGKILL) twice in the middle of an orchestration: the restarted
// scheduler continues where the rows say, and every runtime is upgraded exactly once (one
// engine operation each, one new configuration at the reconciler).
func TestOrchestrationSurvivesKills(t *testing.T) {
	const n, workers = 16, 3
	child := onDefaults(t, "APP_ORCHESTRATION_POLL_INTERVAL=50ms", "APP_ORCHESTRATION_LOCK_RETRY_INTERVAL=100ms")
	child.start()
	b := child.client()
	ids, ops := provisionMany(t, b, n, "orch")
	waitAll(t, b, ids, ops, 5*time.Minute)

	id := ot.UpgradeKyma(t, b, "2.21.0", workers, map[string]any{"target": "all"})
	check := func(st dto.StatusResponse) {
		assert.LessOrEqual(t, st.OperationStats[dto.InProgress], workers, "%v", st.OperationStats)
	}
	for _, done := range []int{3, 9} {
		at := ot.Wait(t, b, id, 2*time.Minute, func(st dto.StatusResponse) bool {
			return st.OperationStats[dto.Succeeded] >= done && st.OperationStats[dto.InProgress] > 0
		}, check)
		child.kill()
		t.Logf("killed the broker at %v", at.OperationStats)
		child.start()
	}
	st := ot.Wait(t, b, id, 5*time.Minute, nil, check)
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	assert.Equal(t, n, st.OperationStats[dto.Succeeded])

	store := child.openStore()
	opsOf := ot.Operations(t, b, id)
	assert.LessOrEqual(t, ot.MaxOverlap(t, store, opsOf), workers)
	ups := ot.UpgradesOf(t, store, ids)
	assert.Len(t, ups, n)
	for inst, count := range ups {
		assert.Equal(t, 1, count, "instance %s upgraded once", inst)
	}
	clusters := readInventory(t, child.sandboxURL).liveClusters()
	require.Len(t, clusters, n)
	for _, c := range clusters {
		assert.Equal(t, "2.21.0", c.KymaVersion, c.RuntimeID)
		assert.Equal(t, 2, c.ConfigurationVersionsCreated, "cluster %s: provisioning's configuration and one upgrade", c.RuntimeID)
	}
}
