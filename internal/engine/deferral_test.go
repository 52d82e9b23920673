package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// countingInstances counts the SetInstanceFields calls that reach the store.
type countingInstances struct {
	storage.Instances
	sets atomic.Int32
}

func (c *countingInstances) SetInstanceFields(ctx context.Context, id string, f storage.InstanceFields) error {
	c.sets.Add(1)
	return c.Instances.SetInstanceFields(ctx, id, f)
}

// A step's instance fields set through DeferringInstances ride on its operation's next write
// (the step's own, for a step that is not local): no statement of their own, written before the
// next step runs. Called outside a step run, they are written at once.
func TestInstanceFieldsRideOnTheOperationsWrite(t *testing.T) {
	h, ops := countingHarness(t)
	_, err := h.store.Instances().InsertInstance(context.Background(), storage.Instance{InstanceID: "instance-1"})
	require.NoError(t, err)
	counting := &countingInstances{Instances: h.store.Instances()}
	insts := DeferringInstances{Instances: counting}
	var seenBefore string
	set := step("set", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op, 0, insts.SetInstanceFields(ctx, op.InstanceID, storage.InstanceFields{RuntimeID: sp("rt-1")})
	})
	other := step("other", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		inst, err := h.store.Instances().GetInstance(ctx, op.InstanceID)
		seenBefore = inst.RuntimeID
		if err != nil {
			return op, 0, err
		}
		// Another instance's fields are not the operation's: written at once.
		return op, 0, insts.SetInstanceFields(ctx, "elsewhere", storage.InstanceFields{RuntimeID: sp("x")})
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(set), readOnly(other)}})
	require.NoError(t, err)
	h.eng = h.engine(p)
	id := h.insert("provision", time.Hour).ID
	require.Equal(t, 1, h.runDue())

	got, _ := h.get(id)
	require.Equal(t, storage.StateFailed, got.State, "elsewhere does not exist")
	assert.Equal(t, "rt-1", seenBefore, "written with set's save, before the next step")
	inst, err := h.store.Instances().GetInstance(context.Background(), "instance-1")
	require.NoError(t, err)
	assert.Equal(t, "rt-1", inst.RuntimeID)
	assert.Equal(t, int32(1), counting.sets.Load(), "only the other instance's fields reached the store themselves")
	assert.Equal(t, int64(2), ops.saves.Load(), "set's save and the end")

	require.NoError(t, insts.SetInstanceFields(context.Background(), "instance-1", storage.InstanceFields{DashboardURL: sp("https://d")}))
	assert.Equal(t, int32(2), counting.sets.Load(), "outside a step run: written at once")
}

func sp(s string) *string { return &s }

// countingRuntimes counts the SetRuntimeFields calls that reach the store.
type countingRuntimes struct {
	storage.Runtimes
	sets atomic.Int32
}

func (c *countingRuntimes) SetRuntimeFields(ctx context.Context, id string, f storage.RuntimeFields) error {
	c.sets.Add(1)
	return c.Runtimes.SetRuntimeFields(ctx, id, f)
}

// DeferringRuntimes: a step's Compass ID of the runtime its operation is of rides on the
// operation's save, as DeferringInstances' fields do.
func TestRuntimeFieldsRideOnTheOperationsWrite(t *testing.T) {
	h, ops := countingHarness(t)
	_, _, err := h.store.Runtimes().InsertRuntimeWithOperation(context.Background(),
		storage.Runtime{ID: "instance-1", Tenant: "t", Name: "rt", Backend: "simulated"},
		storage.Operation{ID: "other-op", InstanceID: "instance-1", Type: "other", State: storage.StateSucceeded})
	require.NoError(t, err)
	counting := &countingRuntimes{Runtimes: h.store.Runtimes()}
	rts := DeferringRuntimes{Runtimes: counting}
	var seen string
	register := step("register", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op, 0, rts.SetRuntimeFields(ctx, op.InstanceID, storage.RuntimeFields{CompassRuntimeID: sp("compass-1")})
	})
	next := step("next", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		rt, err := h.store.Runtimes().GetRuntime(ctx, op.InstanceID)
		seen = rt.CompassRuntimeID
		return op, 0, err
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(register), def(next)}})
	require.NoError(t, err)
	h.eng = h.engine(p)
	id := h.insert("provision", time.Hour).ID
	require.Equal(t, 1, h.runDue())
	got, _ := h.get(id)
	require.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, "compass-1", seen, "written with register's save, before the next step")
	assert.Equal(t, int32(0), counting.sets.Load(), "no statement of its own")
	assert.Equal(t, int64(2), ops.saves.Load())
}
