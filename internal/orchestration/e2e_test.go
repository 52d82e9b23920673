package orchestration_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// invariant checks on every poll: the counts add up to the fleet and never more than workers run.
func invariant(t *testing.T, total, workers int, maxSeen *int) func(dto.StatusResponse) {
	return func(st dto.StatusResponse) {
		sum := 0
		for _, n := range st.OperationStats {
			sum += n
		}
		assert.Equal(t, total, sum, "counts add up: %v", st.OperationStats)
		assert.LessOrEqual(t, st.OperationStats[dto.InProgress], workers, "at most %d upgrades at once: %v", workers, st.OperationStats)
		*maxSeen = max(*maxSeen, st.OperationStats[dto.InProgress])
	}
}

// 30 runtimes upgraded by 4 workers: never more than 4 at once, all succeed, counts right on
// every poll; a runtime busy with another operation waits, saying why, and is upgraded after.
func TestThirtyRuntimesFourWorkers(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	ids := ot.Fleet(t, b, 30, 3)

	// The first runtime is busy with an update that the engine will not run until the test ends it.
	later := time.Now().Add(time.Hour)
	busy, err := engine.NewOperation(instance.TypeUpdate, ids[0], map[string]any{}, time.Hour, time.Now())
	require.NoError(t, err)
	busy.DueAt = &later
	_, err = b.Store.Operations().InsertOperation(context.Background(), busy)
	require.NoError(t, err)

	id := ot.UpgradeKyma(t, b, "2.21.0", 4, map[string]any{"target": "all"})
	maxSeen := 0
	check := invariant(t, 30, 4, &maxSeen)
	st := ot.Wait(t, b, id, 2*time.Minute, func(st dto.StatusResponse) bool {
		return st.OperationStats[dto.Succeeded] == 29
	}, check)
	assert.Equal(t, dto.InProgress, st.State)
	var waiting dto.OperationResponse
	for _, op := range ot.Operations(t, b, id) {
		if op.InstanceID == ids[0] {
			waiting = op
		}
	}
	assert.Equal(t, dto.Pending, waiting.State)
	assert.Contains(t, waiting.Description, "instance busy: update operation "+busy.ID+" is in progress")
	b.FinishOperation(busy.ID, storage.StateSucceeded)

	st = ot.Wait(t, b, id, time.Minute, nil, check)
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	t.Logf("30 upgrades with 4 workers: %s from creation to the end (one runtime waited for its update)", st.UpdatedAt.Sub(st.CreatedAt).Round(time.Millisecond))
	assert.Equal(t, 30, st.OperationStats[dto.Succeeded])
	assert.Equal(t, "30 succeeded, 0 skipped", st.Description)
	ops := ot.Operations(t, b, id)
	require.Len(t, ops, 30)
	most := ot.MaxOverlap(t, b.Store, ops)
	assert.LessOrEqual(t, most, 4)
	t.Logf("most upgrades at once: %d by the operations' times, %d seen by polling", most, maxSeen)
	for inst, n := range ot.UpgradesOf(t, b.Store, ids) {
		assert.Equal(t, 1, n, "instance %s upgraded once", inst)
	}
	assert.Len(t, ot.UpgradesOf(t, b.Store, ids), 30)

	// One operation in detail: its steps and events.
	r := b.Get("/orchestrations/" + id + "/operations/" + ops[1].OperationID)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	var detail dto.OperationDetailResponse
	r.JSON(t, &detail)
	assert.Equal(t, dto.Succeeded, detail.State)
	assert.NotEmpty(t, detail.Steps)
	assert.NotEmpty(t, detail.Events)
	assert.Equal(t, 1, detail.Attempts)

	// Listing and filters.
	r = b.Get("/orchestrations?state=succeeded")
	var list dto.StatusResponseList
	r.JSON(t, &list)
	require.Equal(t, 1, list.TotalCount)
	assert.Equal(t, id, list.Data[0].OrchestrationID)
	r = b.Get("/orchestrations/" + id + "/operations?state=succeeded&page=2&page_size=20")
	var page dto.OperationResponseList
	r.JSON(t, &page)
	assert.Equal(t, 30, page.TotalCount)
	assert.Equal(t, 10, page.Count)

	// Finished: cancel is a conflict, retry has nothing to do.
	assert.Equal(t, http.StatusConflict, b.Put("/orchestrations/"+id+"/cancel", nil).Status)
	assert.Equal(t, http.StatusConflict, b.Put("/orchestrations/"+id+"/retry", nil).Status)
}

// A cancel halfway: the running upgrades finish, every one not started is canceled and never runs.
func TestCancelHalfway(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	ids := ot.Fleet(t, b, 30, 3)
	id := ot.UpgradeKyma(t, b, "2.21.0", 4, map[string]any{"target": "all"})
	maxSeen := 0
	check := invariant(t, 30, 4, &maxSeen)
	ot.Wait(t, b, id, 2*time.Minute, func(st dto.StatusResponse) bool { return st.OperationStats[dto.Succeeded] >= 10 }, check)
	// Ten operators cancel at once: one cancels, the others find it canceling or canceled.
	answers := make([]bt.Response, 10)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = b.Put("/orchestrations/"+id+"/cancel", nil)
		}()
	}
	wg.Wait()
	var res dto.CancelResponse
	winners := 0
	for _, r := range answers {
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		var one dto.CancelResponse
		r.JSON(t, &one)
		if one.Canceled > 0 {
			winners++
			res = one
		}
	}
	assert.Equal(t, 1, winners, "one cancel did the work")
	assert.Greater(t, res.Canceled, 10)

	st := ot.Wait(t, b, id, time.Minute, nil, check)
	require.Equal(t, dto.Canceled, st.State, st.Description)
	assert.Equal(t, res.Canceled, st.OperationStats[dto.Canceled])
	assert.Equal(t, 30, st.OperationStats[dto.Succeeded]+st.OperationStats[dto.Canceled])
	for _, op := range ot.Operations(t, b, id) {
		_, err := b.Store.Operations().GetOperation(context.Background(), op.OperationID)
		if op.State == dto.Canceled {
			assert.ErrorIs(t, err, storage.ErrNotFound, "canceled %s never started", op.InstanceID)
			assert.Nil(t, op.StartedAt)
		} else {
			assert.NoError(t, err)
		}
	}
	ups := ot.UpgradesOf(t, b.Store, ids)
	assert.Len(t, ups, st.OperationStats[dto.Succeeded])
}

// Upgrades that fail while the reconciler is down; a retry re-runs only those.
func TestRetryRerunsOnlyTheFailed(t *testing.T) {
	// Short retry windows fail the upgrades soon; a short breaker cooldown lets calls through
	// soon after the outage.
	b := bt.Start(t, bt.Options{Externals: func(c *externals.Config) {
		c.Settings.RetryTime, c.Reconciler.Calls.BreakerCooldown = 2*time.Second, 200*time.Millisecond
	}})
	ids := ot.Fleet(t, b, 12, 2)
	require.NoError(t, b.Sandbox.SetFaults(reconcilerstandin.Name, sandbox.Faults{OutageUntil: time.Now().Add(time.Hour)}))
	id := ot.UpgradeKyma(t, b, "2.22.0", 4, map[string]any{"globalAccount": "ga-0"}, map[string]any{"globalAccount": "ga-1"})
	maxSeen := 0
	check := invariant(t, 12, 4, &maxSeen)
	ot.Wait(t, b, id, time.Minute, func(st dto.StatusResponse) bool { return st.OperationStats[dto.Failed] >= 4 }, check)
	require.NoError(t, b.Sandbox.SetFaults(reconcilerstandin.Name, sandbox.Faults{}))
	st := ot.Wait(t, b, id, time.Minute, nil, check)
	require.Equal(t, dto.Failed, st.State)
	failed := st.OperationStats[dto.Failed]
	require.GreaterOrEqual(t, failed, 4)
	assert.Equal(t, 12, failed+st.OperationStats[dto.Succeeded])

	firstTry := map[string]string{}
	for _, op := range ot.Operations(t, b, id) {
		firstTry[op.InstanceID] = op.State
		if op.State == dto.Failed {
			assert.Contains(t, op.Description, "Reconciler", "a failure names the system")
		}
	}
	r := b.Put("/orchestrations/"+id+"/retry", map[string]any{"operationIDs": []string{"not-an-operation"}})
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r)
	assert.Contains(t, r.Description(), "operationIDs")
	r = b.Put("/orchestrations/"+id+"/retry", nil)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	var res dto.RetryResponse
	r.JSON(t, &res)
	assert.Len(t, res.RetriedOperations, failed)
	st = ot.Wait(t, b, id, time.Minute, nil, check)
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	assert.Equal(t, 12, st.OperationStats[dto.Succeeded])

	ups := ot.UpgradesOf(t, b.Store, ids)
	for _, op := range ot.Operations(t, b, id) {
		want := 1
		if firstTry[op.InstanceID] == dto.Failed {
			want = 2
		}
		assert.Equal(t, want, ups[op.InstanceID], "instance %s (first try %s)", op.InstanceID, firstTry[op.InstanceID])
		assert.Equal(t, want, op.Attempts)
	}
}

// A deprovisioning accepted while the instance's upgrade runs waits for the upgrade, and the row
// shows the upgrade's own outcome (not skipped).
func TestDeprovisioningDuringUpgradeWaits(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	ids := ot.Fleet(t, b, 1, 1)
	// The reconciler down keeps the upgrade running until the deprovisioning is accepted.
	require.NoError(t, b.Sandbox.SetFaults(reconcilerstandin.Name, sandbox.Faults{OutageUntil: time.Now().Add(time.Hour)}))
	id := ot.UpgradeKyma(t, b, "2.22.0", 1, map[string]any{"target": "all"})
	ot.Wait(t, b, id, time.Minute, func(st dto.StatusResponse) bool { return st.OperationStats[dto.InProgress] == 1 }, nil)
	r := b.Delete(bt.DeprovisionPath(ids[0], bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	dep := r.Operation()
	require.NoError(t, b.Sandbox.SetFaults(reconcilerstandin.Name, sandbox.Faults{}))

	st := ot.Wait(t, b, id, 2*time.Minute, nil, nil)
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	assert.Equal(t, 1, st.OperationStats[dto.Succeeded])
	assert.Zero(t, st.OperationStats[dto.Skipped])
	b.WaitSucceeded(ids[0], dep)
	ops := ot.Operations(t, b, id)
	require.Len(t, ops, 1)
	up, err := b.Store.Operations().GetOperation(context.Background(), ops[0].OperationID)
	require.NoError(t, err)
	assert.Equal(t, storage.StateSucceeded, up.State)
	d, err := b.Store.Operations().GetOperation(context.Background(), dep)
	require.NoError(t, err)
	// Its initialization step waits for the upgrade; every later step starts after the upgrade ended.
	later := 0
	for name, sp := range d.Progress.Steps {
		if name == "Deprovision_Initialization" {
			assert.Greater(t, sp.Attempts, 1, "the initialization waited for the upgrade")
			continue
		}
		later++
		assert.False(t, sp.FirstAttempt.Before(up.UpdatedAt), "step %s (%s) ran after the upgrade ended (%s)", name, sp.FirstAttempt, up.UpdatedAt)
	}
	assert.Positive(t, later)
}
