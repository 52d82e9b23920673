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
	m, err := NewManager(store, onePlan{}, Config{MaintenanceWindow: "01:00-03:00"}, log)
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
	assert.Equal(t, at("2026-03-03T01:30:00Z").Add(3*time.Hour), op.Deadline, "the upgrade deadline (APP_BROKER_UPGRADE_TIMEOUT) counts from the start")
	st, err := m.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, dto.InProgress, st.State)
}
