package orchestration

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
)

// onePlan names the plan "aws" (ID "aws-id").
type onePlan struct{}

func (onePlan) PlanID(s string) (string, bool) { return "aws-id", s == "aws" || s == "aws-id" }
func (onePlan) PlanName(string) string         { return "aws" }

// A maintenanceWindow upgrade waits for the window; one whose window passed before it could start
// waits for the next one, saying so; in the window it starts.
func TestMaintenanceWindowSchedule(t *testing.T) {
	ctx := context.Background()
	store := storagetest.OpenSQLite(t)
	_, err := store.Instances().InsertInstance(ctx, storage.Instance{InstanceID: "i1", RuntimeID: "r1", PlanID: "aws-id", GlobalAccountID: "ga"})
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	m, err := NewManager(store, onePlan{}, Config{MaintenanceWindow: "01:00-03:00", UpgradeTimeout: 90 * time.Minute}, log)
	require.NoError(t, err)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	m.now = func() time.Time { return at("2026-03-01T12:00:00Z") }
	id, err := m.Create(ctx, dto.UpgradeKyma, dto.Parameters{
		Targets: dto.TargetSpec{Include: []dto.Target{{Target: dto.TargetAll}}}, Kyma: &dto.KymaParameters{Version: "2.21.0"},
		Strategy: dto.StrategySpec{Schedule: dto.ScheduleMaintenanceWindow},
	})
	require.NoError(t, err)
	row := func() dto.OperationResponse {
		ops, err := m.Operations(ctx, id, nil, storage.Paging{})
		require.NoError(t, err)
		require.Len(t, ops.Data, 1)
		return ops.Data[0]
	}
	assert.Equal(t, at("2026-03-02T01:00:00Z"), row().ScheduledAt)

	s := m.Scheduler()
	require.NoError(t, s.Tick(ctx))
	assert.Equal(t, dto.Pending, row().State, "not due yet")

	m.now = func() time.Time { return at("2026-03-02T04:00:00Z") }
	require.NoError(t, s.Tick(ctx))
	assert.Equal(t, dto.Pending, row().State)
	assert.Equal(t, at("2026-03-03T01:00:00Z"), row().ScheduledAt)
	assert.Contains(t, row().Description, "waiting for the maintenance window 01:00-03:00 UTC")

	m.now = func() time.Time { return at("2026-03-03T01:30:00Z") }
	require.NoError(t, s.Tick(ctx))
	started := row()
	assert.Equal(t, dto.InProgress, started.State)
	op, err := store.Operations().GetOperation(ctx, started.OperationID)
	require.NoError(t, err)
	assert.Equal(t, at("2026-03-03T01:30:00Z").Add(90*time.Minute), op.Deadline, "the upgrade deadline (APP_BROKER_UPGRADE_TIMEOUT) counts from the start")
	st, err := m.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, dto.InProgress, st.State)
}

// A runtime deprovisioned after it was selected, and one whose deprovisioning was accepted: both
// are skipped saying why (never started, not failed), the other runs; the orchestration succeeds.
func TestDeprovisionedRuntimeSkipped(t *testing.T) {
	ctx := context.Background()
	store := storagetest.OpenSQLite(t)
	for _, id := range []string{"i1", "i2", "i3"} {
		_, err := store.Instances().InsertInstance(ctx, storage.Instance{InstanceID: id, RuntimeID: "r-" + id, PlanID: "aws-id"})
		require.NoError(t, err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	m, err := NewManager(store, onePlan{}, Config{}, log)
	require.NoError(t, err)
	id, err := m.Create(ctx, dto.UpgradeCluster, dto.Parameters{
		Targets: dto.TargetSpec{Include: []dto.Target{{PlanName: "aws"}}}, Kubernetes: &dto.KubernetesParameters{KubernetesVersion: "1.32"},
		Strategy: dto.StrategySpec{Parallel: dto.ParallelSpec{Workers: 3}},
	})
	require.NoError(t, err)
	inst, err := store.Instances().GetInstance(ctx, "i1")
	require.NoError(t, err)
	now := time.Now()
	inst.DeletedAt = &now
	_, err = store.Instances().UpdateInstance(ctx, inst)
	require.NoError(t, err)
	dep, err := store.Instances().InsertOperationExclusive(ctx, storage.Operation{ID: "dep-i2", InstanceID: "i2", Type: storage.TypeDeprovision,
		State: storage.StatePending, DueAt: &now, Deadline: now.Add(time.Hour), Stage: "start", Data: []byte(`{}`)}, []string{storage.TypeDeprovision})
	require.NoError(t, err)

	require.NoError(t, m.Scheduler().Tick(ctx))
	ops, err := m.Operations(ctx, id, nil, storage.Paging{})
	require.NoError(t, err)
	require.Len(t, ops.Data, 3)
	assert.Equal(t, dto.Skipped, ops.Data[0].State)
	assert.Equal(t, "skipped: the instance was deprovisioned", ops.Data[0].Description)
	assert.Equal(t, dto.Skipped, ops.Data[1].State)
	assert.Contains(t, ops.Data[1].Description, "deprovisioning operation "+dep.ID)
	assert.Nil(t, ops.Data[1].StartedAt, "never started")
	assert.Equal(t, dto.InProgress, ops.Data[2].State)
	for _, i := range []string{"i1", "i2"} {
		page, err := store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{i}, Types: []string{dto.UpgradeCluster}})
		require.NoError(t, err)
		assert.Zero(t, page.TotalCount, "no upgrade of %s", i)
	}

	_, err = m.Retry(ctx, id, nil)
	var bad *BadRequestError
	assert.ErrorAs(t, err, &bad, "skipped operations are not retried")
	_, err = m.Retry(ctx, id, []string{ops.Data[1].OperationID})
	assert.ErrorAs(t, err, &bad, "a skipped operation is not retried even when named")

	up, err := store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{"i3"}, Types: []string{dto.UpgradeCluster}})
	require.NoError(t, err)
	require.Len(t, up.Items, 1)
	op := up.Items[0]
	op.State = storage.StateSucceeded
	_, err = store.Operations().UpdateOperation(ctx, op)
	require.NoError(t, err)
	require.NoError(t, m.Scheduler().Tick(ctx))
	st, err := m.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, dto.Succeeded, st.State, st.Description)
	assert.Equal(t, "1 succeeded, 2 skipped", st.Description)
	assert.Equal(t, 2, st.OperationStats[dto.Skipped])
	assert.Equal(t, 0, st.OperationStats[dto.Failed])
}
