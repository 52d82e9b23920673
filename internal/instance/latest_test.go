package instance_test

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatestProvisionedSkipsUpgradesThatNeverInitialised(t *testing.T) {
	store := storagetest.OpenSQLite(t)
	ctx := context.Background()
	_, err := store.Instances().InsertInstance(ctx, storage.Instance{InstanceID: "i1", GlobalAccountID: "ga", SubAccountID: "sa", ServiceID: "s", PlanID: "p", Parameters: []byte(`{}`)})
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(typ string, data any, state storage.OperationState, at time.Time, secrets storage.Secrets) string {
		op, err := engine.NewOperation(typ, "i1", data, time.Hour, at)
		require.NoError(t, err)
		op.Secrets = secrets
		op, err = store.Operations().InsertOperation(ctx, op)
		require.NoError(t, err)
		op.State, op.DueAt = state, nil
		_, err = store.Operations().UpdateOperation(ctx, op)
		require.NoError(t, err)
		return op.ID
	}

	none, err := instance.LatestProvisioned(ctx, store.Operations(), "i1")
	require.NoError(t, err)
	assert.Empty(t, none.OperationID)

	prov := instance.ProvisioningData{Resources: instance.Resources{AVSInternalEvaluationID: 7},
		Overrides: overrides.Overrides{"c": {{Key: "k", Secret: true}}}}
	provID := insert(instance.TypeProvision, prov, storage.StateSucceeded, t0, storage.Secrets{overrides.SecretKey("c", "k"): "v"})
	insert(instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: "2.21.0"}, storage.StateFailed, t0.Add(time.Minute), nil)
	insert(instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: "2.22.0"}, storage.StateInProgress, t0.Add(2*time.Minute), nil)

	got, err := instance.LatestProvisioned(ctx, store.Operations(), "i1")
	require.NoError(t, err)
	assert.Equal(t, provID, got.OperationID, "the failed upgrade never initialised; the running one is not finished")
	assert.Equal(t, int64(7), got.Resources.AVSInternalEvaluationID)
	assert.Equal(t, "v", got.Secrets[overrides.SecretKey("c", "k")])

	upID := insert(instance.TypeUpgradeKyma, instance.UpgradeKymaData{KymaVersion: "2.21.0", Initialized: true,
		Resources: instance.Resources{EMSInstanceID: "ems"}}, storage.StateFailed, t0.Add(3*time.Minute), nil)
	got, err = instance.LatestProvisioned(ctx, store.Operations(), "i1")
	require.NoError(t, err)
	assert.Equal(t, upID, got.OperationID, "an initialised upgrade, even a failed one, knows the resources")
	assert.Equal(t, "ems", got.Resources.EMSInstanceID)
}
