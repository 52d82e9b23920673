package engine

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// liveEngine runs Run on the wall clock and returns a stop function that waits for Run to end.
func liveEngine(t *testing.T, store storage.Store, cfg Config, defs ...Definition) (stop func()) {
	t.Helper()
	eng, err := New(store, cfg, testLogger())
	require.NoError(t, err)
	for _, d := range defs {
		require.NoError(t, eng.Register(d))
	}
	return testenv.Background(t, eng.Run)
}

func insertNow(t *testing.T, store storage.Store, opType string) storage.Operation {
	t.Helper()
	op, err := NewOperation(opType, "instance-1", testData{}, time.Hour, time.Now())
	require.NoError(t, err)
	saved, err := store.Operations().InsertOperation(context.Background(), op)
	require.NoError(t, err)
	return saved
}

// probedWakeups passes the store's wake-ups on to the engine through an unbuffered channel of
// its own, on which the test sends probes too: only the dispatcher's sleep takes from it, so a
// probe taken shows the dispatcher asleep.
type probedWakeups struct {
	storage.Store
	ch chan struct{}
}

func withWakeProbe(s storage.Store) *probedWakeups {
	return &probedWakeups{Store: s, ch: make(chan struct{})}
}

func (s *probedWakeups) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	in, err := s.Store.Wakeups(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-in:
				select {
				case s.ch <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return s.ch, nil
}

// asleep returns once the dispatcher has taken two probes: it takes the second only after it
// has gone through a claim (or found no free worker) that began after the first, and gone back
// to sleep; whatever the test did before the call has been seen by then.
func (s *probedWakeups) asleep(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for range 2 {
		select {
		case s.ch <- struct{}{}:
		case <-deadline:
			t.Fatalf("the dispatcher did not go to sleep within %s", within)
		}
	}
}

// waitState polls the operation's row until it is in state, failing the test after within.
func waitState(t *testing.T, store storage.Store, id string, state storage.OperationState, within time.Duration) storage.Operation {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		op, err := store.Operations().GetOperation(context.Background(), id)
		require.NoError(t, err)
		if op.State == state {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %s is %s after %s, want %s (last error %q)", id, op.State, within, state, op.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNewOperationWakesIdleEngineAtOnce(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	store := withWakeProbe(newStore(t))
	// A poll interval far longer than the test: only the wake-up can start the operation.
	liveEngine(t, store, Config{Workers: 2, PollInterval: time.Hour}, p)
	store.asleep(t, 5*time.Second) // the dispatcher is idle
	op := insertNow(t, store, "provision")
	waitState(t, store, op.ID, storage.StateSucceeded, 2*time.Second)
}

func TestRetryWaitIsHonouredWithoutPolling(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", waitOnce(100*time.Millisecond)))}})
	require.NoError(t, err)
	store := newStore(t)
	liveEngine(t, store, Config{Workers: 2, PollInterval: time.Hour}, p)
	op := insertNow(t, store, "provision")
	start := time.Now()
	waitState(t, store, op.ID, storage.StateSucceeded, 2*time.Second)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
}

func TestGracefulShutdownLetsRunningStepFinishAndReleases(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	slow := step("slow", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		close(running)
		<-release
		op.Data.Trace = append(op.Data.Trace, "slow")
		return op, 0, nil
	})
	next := step("next", nil)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(slow), def(next)}})
	require.NoError(t, err)
	store := newStore(t)
	eng, err := New(store, Config{Workers: 2, ShutdownTimeout: 10 * time.Second}, testLogger())
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	stop := testenv.Background(t, eng.Run)
	op := insertNow(t, store, "provision")
	<-running
	go func() {
		// The step finishes once the shutdown has begun: the next step must not start.
		defer close(release)
		for deadline := time.Now().Add(10 * time.Second); !eng.stopping.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("the engine did not begin to stop")
				return
			}
		}
	}()
	stop() // returns only after the step finished and its outcome was saved

	got, err := store.Operations().GetOperation(context.Background(), op.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StateInProgress, got.State)
	assert.True(t, got.Progress.Steps["slow"].Done)
	assert.Empty(t, got.LeaseOwner, "released for another replica")
	require.NotNil(t, got.DueAt)
	assert.Equal(t, 0, next.Runs(), "no new step starts during shutdown")

	eng, err = New(store, Config{}, testLogger())
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	_, err = eng.RunDue(context.Background())
	require.NoError(t, err)
	got, err = store.Operations().GetOperation(context.Background(), op.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, 1, next.Runs())
}

func TestShutdownTimeoutCancelsStepWithoutFailingOperation(t *testing.T) {
	running := make(chan struct{})
	stuck := step("stuck", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		close(running)
		<-ctx.Done()
		return op, 0, ctx.Err()
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(stuck)}})
	require.NoError(t, err)
	store := newStore(t)
	stop := liveEngine(t, store, Config{Workers: 1, ShutdownTimeout: 100 * time.Millisecond}, p)
	op := insertNow(t, store, "provision")
	<-running
	stop()
	got, err := store.Operations().GetOperation(context.Background(), op.ID)
	require.NoError(t, err)
	assert.Equal(t, storage.StateInProgress, got.State, "an interrupted step is not a failed one")
	assert.Empty(t, got.LeaseOwner)
	assert.False(t, got.Progress.Steps["stuck"].Done)
}

func TestRunTimeoutEndsOneRun(t *testing.T) {
	attempts := 0
	hanging := step("hanging", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		attempts++
		if attempts == 1 {
			<-ctx.Done() // the run's own deadline, not a shutdown
			return op.RetryOperation("call timed out", time.Millisecond, time.Minute)
		}
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{{Step: hanging, RunTimeout: 50 * time.Millisecond}}})
	require.NoError(t, err)
	store := newStore(t)
	liveEngine(t, store, Config{Workers: 1}, p)
	op := insertNow(t, store, "provision")
	waitState(t, store, op.ID, storage.StateSucceeded, 3*time.Second)
	assert.Equal(t, 2, attempts)
}
