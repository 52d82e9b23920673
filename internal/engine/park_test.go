package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// signalled is a step that waits (for wait) on signal key "k" until ready, counting its runs.
func signalled(ready *atomic.Bool, wait time.Duration) *funcStep {
	return step("wait", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if !ready.Load() {
			op.WaitIsSignaledBy("k")
			return op, wait, nil
		}
		op.Data.Trace = append(op.Data.Trace, "wait")
		return op, 0, nil
	})
}

// parking runs an engine with signals on a counting store (real clock) until the test ends.
type parking struct {
	*harness
	ops     *countingOps
	signals *Signals
	stop    func()
}

func runParking(t *testing.T, p *Process[testData], maxPark time.Duration) *parking {
	t.Helper()
	h, ops := countingHarness(t)
	s := NewSignals()
	s.maxPark = maxPark
	eng, err := New(h.store, Config{Workers: 4, LeaseDuration: time.Minute, PollInterval: 10 * time.Millisecond}, testLogger(), WithSignals(s), WithRegisterer(prometheus.NewRegistry()))
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	h.eng = eng
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return &parking{harness: h, ops: ops, signals: s, stop: stop}
}

func (p *parking) insert() string {
	p.t.Helper()
	op, err := NewOperation("provision", "instance-1", testData{}, time.Hour, time.Now())
	require.NoError(p.t, err)
	saved, err := p.store.Operations().InsertOperation(context.Background(), op)
	require.NoError(p.t, err)
	return saved.ID
}

func (p *parking) state(id string) storage.Operation {
	op, _ := p.get(id)
	return op
}

func (p *parking) waitFor(what string, cond func() bool) {
	p.t.Helper()
	require.Eventually(p.t, cond, 10*time.Second, 5*time.Millisecond, what)
}

// A step waiting for a signal parks its run: nothing is written for the wait (no release, no
// claim after it); the signal runs the step again, and the retry's event and progress ride on
// the next write.
func TestASignalledWaitGoesOnWithoutAWrite(t *testing.T) {
	var ready atomic.Bool
	wait := signalled(&ready, time.Second)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x1", nil)), def(wait), def(step("x2", nil))}})
	require.NoError(t, err)
	e := runParking(t, p, time.Minute)
	id := e.insert()
	e.waitFor("the run parks", func() bool { return e.signals.Parked() == 1 })
	before := e.ops.saves.Load()
	got := e.state(id)
	assert.NotEmpty(t, got.LeaseOwner, "the operation is still held")
	assert.True(t, got.Progress.Steps["x1"].Done, "x1's outcome was written before the wait")

	ready.Store(true)
	require.True(t, e.signals.Signal("k"))
	e.waitFor("the operation succeeds", func() bool { return e.state(id).State == storage.StateSucceeded })
	// After wait (before x2) and the end: none for the wait itself.
	assert.Equal(t, int64(2), e.ops.saves.Load()-before)
	assert.Equal(t, 2, wait.Runs())
	assert.Equal(t, []string{"x1:succeeded", "wait:retrying", "wait:succeeded", "x2:succeeded"}, eventKinds(e.events(id)))
	_, data := e.get(id)
	assert.Equal(t, []string{"x1", "wait", "x2"}, data.Trace)
	assert.Equal(t, 1.0, testutil.ToFloat64(e.eng.metrics.parks.WithLabelValues("provision", "parked")))
	assert.False(t, e.signals.Signal("k"), "nothing parked any more")
}

// A parked run that is not signalled runs its step again after maxPark; a run parks once, so a
// second wait is written as any other (released, claimed again when due). A wait longer than
// maxPark does not park.
func TestAnUnsignalledParkEndsWithItsWaitThenTheWaitIsWritten(t *testing.T) {
	var ready atomic.Bool
	var runs atomic.Int32
	wait := step("wait", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if runs.Add(1) < 3 {
			op.WaitIsSignaledBy("k")
			return op, 50 * time.Millisecond, nil
		}
		ready.Store(true)
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(wait)}})
	require.NoError(t, err)
	e := runParking(t, p, 100*time.Millisecond)
	id := e.insert()
	e.waitFor("the operation succeeds", func() bool { return e.state(id).State == storage.StateSucceeded })
	assert.Equal(t, int32(3), runs.Load())
	assert.Equal(t, 0, e.signals.Parked())
	assert.Equal(t, 1.0, testutil.ToFloat64(e.eng.metrics.parks.WithLabelValues("provision", "written")), "the second wait")
	// The second wait (after the park) and the end.
	assert.Equal(t, int64(2), e.ops.saves.Load())
	assert.Equal(t, []string{"wait:retrying", "wait:succeeded"}, eventKinds(e.events(id)), "one event per change of what the step waits for")
}

// A signal given before the run parks (what it waits for finished first) is not lost: the step
// runs again at once.
func TestASignalBeforeTheParkRunsTheStepAgainAtOnce(t *testing.T) {
	var ready atomic.Bool
	wait := signalled(&ready, time.Second)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(wait)}})
	require.NoError(t, err)
	e := runParking(t, p, time.Minute)
	e.waitFor("the engine runs", func() bool {
		e.signals.mu.Lock()
		defer e.signals.mu.Unlock()
		return e.signals.open
	})
	assert.False(t, e.signals.Signal("k"), "nothing parked yet")
	ready.Store(true)
	id := e.insert()
	e.waitFor("the operation succeeds", func() bool { return e.state(id).State == storage.StateSucceeded })
	assert.Equal(t, 1, wait.Runs(), "ready at its first run")

	// Now one that finds the signal given while it ran.
	ready.Store(false)
	var signals atomic.Pointer[Signals]
	wait2 := step("wait", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if !ready.Load() {
			ready.Store(true)
			signals.Load().Signal("k") // finished while the step was still looking
			op.WaitIsSignaledBy("k")
			return op, time.Second, nil
		}
		return op, 0, nil
	})
	p2, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(wait2)}})
	require.NoError(t, err)
	e2 := runParking(t, p2, time.Minute)
	signals.Store(e2.signals)
	id2 := e2.insert()
	e2.waitFor("the operation succeeds without waiting an hour", func() bool { return e2.state(id2).State == storage.StateSucceeded })
	assert.Equal(t, 2, wait2.Runs())
}

// Stopping the engine releases a parked operation (written, due when its wait ends), like a
// running one.
func TestStoppingReleasesAParkedOperation(t *testing.T) {
	var ready atomic.Bool
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(signalled(&ready, time.Second))}})
	require.NoError(t, err)
	e := runParking(t, p, time.Minute)
	id := e.insert()
	e.waitFor("the run parks", func() bool { return e.signals.Parked() == 1 })
	e.stop()
	got := e.state(id)
	assert.Equal(t, storage.StateInProgress, got.State)
	assert.Empty(t, got.LeaseOwner, "released")
	assert.Equal(t, 0, e.signals.Parked())
	assert.False(t, e.signals.Signal("k"), "a stopped engine parks nothing")
}

// A run that waited in memory starts its memo anew, as one claimed after a written wait does:
// what an earlier step kept (a status that said "not yet") is not taken for what the wait
// was for.
func TestAParkedRunForgetsItsMemo(t *testing.T) {
	var ready atomic.Bool
	var recalled []bool
	keep := step("keep", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		Remember(op, "status", "not yet")
		return op, 0, nil
	})
	wait := step("wait", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		_, ok := Recall[string](op, "status")
		recalled = append(recalled, ok)
		if !ready.Load() {
			op.WaitIsSignaledBy("k")
			return op, time.Second, nil
		}
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(keep), def(wait)}})
	require.NoError(t, err)
	e := runParking(t, p, time.Minute)
	id := e.insert()
	e.waitFor("the run parks", func() bool { return e.signals.Parked() == 1 })
	ready.Store(true)
	require.True(t, e.signals.Signal("k"))
	e.waitFor("the operation succeeds", func() bool { return e.state(id).State == storage.StateSucceeded })
	assert.Equal(t, []bool{true, false}, recalled)
}

// A wait longer than maxPark (a long wait's backed-off poll) is written at once: parked runs
// stay short.
func TestALongWaitDoesNotPark(t *testing.T) {
	var ready atomic.Bool
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(signalled(&ready, time.Hour))}})
	require.NoError(t, err)
	e := runParking(t, p, time.Minute)
	id := e.insert()
	// The save is counted as it starts: wait for the wait's progress to be in the row.
	e.waitFor("the wait is written", func() bool { return e.state(id).Progress.Steps["wait"].Attempts == 1 })
	assert.Equal(t, int64(1), e.ops.saves.Load())
	got := e.state(id)
	assert.Empty(t, got.LeaseOwner, "released")
	assert.Equal(t, 0, e.signals.Parked())
	assert.False(t, e.signals.Signal("k"))
}

// A signal given while the step ran is not lost when the run cannot park, because its wait is
// longer than maxPark or it parked once already: the run would write an hour's wait, and the
// wake that follows an unparked signal (provisioner.WakeWaiters) skips an operation still
// leased. The step runs again at once instead.
func TestASignalWhileTheStepRunsIsNotLostWhenTheRunCannotPark(t *testing.T) {
	for name, signalAt := range map[string]int32{"a wait longer than maxPark": 1, "a run that parked once": 2} {
		t.Run(name, func(t *testing.T) {
			var runs atomic.Int32
			var signals atomic.Pointer[Signals]
			var ready atomic.Bool
			wait := step("wait", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
				if ready.Load() {
					return op, 0, nil
				}
				op.WaitIsSignaledBy("k")
				if runs.Add(1) < signalAt {
					return op, 50 * time.Millisecond, nil // parks, and its park runs out
				}
				ready.Store(true)
				signals.Load().Signal("k") // finished while the step was still looking
				return op, time.Hour, nil
			})
			p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(wait)}})
			require.NoError(t, err)
			e := runParking(t, p, 100*time.Millisecond)
			signals.Store(e.signals)
			id := e.insert()
			e.waitFor("the operation succeeds without waiting an hour", func() bool { return e.state(id).State == storage.StateSucceeded })
			assert.Equal(t, int(signalAt)+1, wait.Runs())
		})
	}
}
