package provisioner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// waits is a broker step that polls the provisioner's operation every hour; the provisioner's
// last step is noop.
type waits struct {
	ops  storage.Operations
	runs *int
}

func (waits) Name() string { return "Await_Provisioner" }
func (w waits) Run(ctx context.Context, op engine.Operation[struct{}], _ logrus.FieldLogger) (engine.Operation[struct{}], time.Duration, error) {
	*w.runs++
	prov, err := w.ops.GetOperation(ctx, "prov-op")
	if err != nil || prov.State.Active() {
		return op, time.Hour, nil
	}
	return op, 0, nil
}

// A broker operation waiting (for an hour) on the provisioner's operation runs as soon as that
// operation is saved finished, and reads it finished.
func TestWakeWaitersWhenProvisionerOperationFinishes(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	eng, err := engine.New(provisioner.WakeWaiters(store, quiet(), nil), engine.Config{Owner: "me"}, quiet())
	require.NoError(t, err)
	runs := 0
	stage := func(s engine.Step[struct{}]) engine.Stage[struct{}] {
		return engine.Stage[struct{}]{Name: "only", Steps: []engine.StepDef[struct{}]{{Step: s}}}
	}
	prov, err := engine.Staged(operations.TypeProvision, time.Hour, stage(noop{}))
	require.NoError(t, err)
	waiter, err := engine.Staged("provision", time.Hour, stage(waits{ops: store.Operations(), runs: &runs}))
	require.NoError(t, err)
	require.NoError(t, eng.Register(prov))
	require.NoError(t, eng.Register(waiter))

	_, err = store.Instances().InsertInstance(ctx, storage.Instance{InstanceID: "inst", RuntimeID: "rt"})
	require.NoError(t, err)
	now := time.Now().UTC()
	_, err = store.Operations().InsertOperation(ctx, storage.Operation{ID: "broker-op", InstanceID: "inst", Type: "provision", State: storage.StatePending, DueAt: &now})
	require.NoError(t, err)
	n, err := eng.RunDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, runs, "the broker's operation polled once and waits an hour")

	// The provisioner's operation (of runtime rt) runs and finishes: the wait ends at once.
	now = time.Now().UTC()
	_, err = store.Operations().InsertOperation(ctx, storage.Operation{ID: "prov-op", InstanceID: "rt", Type: operations.TypeProvision, State: storage.StatePending, DueAt: &now})
	require.NoError(t, err)
	n, err = eng.RunDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the provisioner's operation, then the broker's it woke")
	assert.Equal(t, 2, runs)
	op, err := store.Operations().GetOperation(ctx, "broker-op")
	require.NoError(t, err)
	assert.Equal(t, storage.StateSucceeded, op.State, "the woken operation read the provisioner's operation finished")
}

// wakeCounting counts Operations.Wake calls.
type wakeCounting struct {
	storage.Store
	ops *wakeCountingOps
}

type wakeCountingOps struct {
	storage.Operations
	wakes atomic.Int32
}

func (s wakeCounting) Operations() storage.Operations { return s.ops }

func (o *wakeCountingOps) Wake(ctx context.Context, r storage.WakeRequest) ([]string, error) {
	o.wakes.Add(1)
	return o.Operations.Wake(ctx, r)
}

// awaitsSignal is a broker step that waits for the provisioner's operation "prov-op", whose
// finish is signalled in process.
type awaitsSignal struct {
	ops  storage.Operations
	runs *atomic.Int32
}

func (awaitsSignal) Name() string { return "Await_Provisioner" }
func (w awaitsSignal) Run(ctx context.Context, op engine.Operation[struct{}], _ logrus.FieldLogger) (engine.Operation[struct{}], time.Duration, error) {
	w.runs.Add(1)
	prov, err := w.ops.GetOperation(ctx, "prov-op")
	if err != nil || prov.State.Active() {
		op.WaitIsSignaledBy(client.FinishedSignal("prov-op"))
		return op, time.Second, nil
	}
	return op, 0, nil
}

// A broker operation parked in memory on the provisioner's operation (engine.Signals) goes on
// when that operation is saved finished, and nothing is written to wake it.
func TestSignalParkedWaiterWithoutAWake(t *testing.T) {
	ctx := context.Background()
	base := openStore(t)
	store := wakeCounting{Store: base, ops: &wakeCountingOps{Operations: base.Operations()}}
	signals := engine.NewSignals()
	eng, err := engine.New(provisioner.WakeWaiters(store, quiet(), signals), engine.Config{Owner: "me", PollInterval: 10 * time.Millisecond}, quiet(), engine.WithSignals(signals))
	require.NoError(t, err)
	var runs atomic.Int32
	wait := awaitsSignal{ops: store.Operations(), runs: &runs}
	stage := func(s engine.Step[struct{}]) engine.Stage[struct{}] {
		return engine.Stage[struct{}]{Name: "only", Steps: []engine.StepDef[struct{}]{{Step: s}}}
	}
	prov, err := engine.Staged(operations.TypeProvision, time.Hour, stage(noop{}))
	require.NoError(t, err)
	waiter, err := engine.Staged("provision", time.Hour, stage(wait))
	require.NoError(t, err)
	require.NoError(t, eng.Register(prov))
	require.NoError(t, eng.Register(waiter))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	_, err = store.Instances().InsertInstance(ctx, storage.Instance{InstanceID: "inst", RuntimeID: "rt"})
	require.NoError(t, err)
	now := time.Now().UTC()
	_, err = store.Operations().InsertOperation(ctx, storage.Operation{ID: "prov-op", InstanceID: "rt", Type: operations.TypeProvision, State: storage.StateInProgress, LeaseOwner: "elsewhere", LeaseExpiresAt: ptr(now.Add(time.Hour)), DueAt: ptr(now.Add(time.Hour))})
	require.NoError(t, err)
	_, err = store.Operations().InsertOperation(ctx, storage.Operation{ID: "broker-op", InstanceID: "inst", Type: "provision", State: storage.StatePending, DueAt: &now})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return signals.Parked() == 1 }, 10*time.Second, 5*time.Millisecond, "the broker's operation parks")

	// The provisioner's operation is released to this engine and finishes.
	require.NoError(t, store.Operations().ReleaseLeases(ctx, "elsewhere", []string{"prov-op"}, now))
	require.Eventually(t, func() bool {
		op, err := store.Operations().GetOperation(ctx, "broker-op")
		return err == nil && op.State == storage.StateSucceeded
	}, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, int32(2), runs.Load())
	assert.Equal(t, int32(0), store.ops.wakes.Load(), "the signal reached it: no wake written")
}

func ptr[T any](v T) *T { return &v }
