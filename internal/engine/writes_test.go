package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingStore counts the engine's durable progress writes on a real store.
type countingStore struct {
	storage.Store
	ops *countingOps
}

type countingOps struct {
	storage.Operations
	saves atomic.Int64
	// lose, when set, makes a save fail before it reaches the store: a crash before that write.
	lose func(op storage.Operation) bool
}

func (s countingStore) Operations() storage.Operations { return s.ops }

func (o *countingOps) SaveProgress(ctx context.Context, op storage.Operation, with storage.Save, events []storage.Event) (storage.Operation, error) {
	o.saves.Add(1)
	if o.lose != nil && o.lose(op) {
		return storage.Operation{}, fmt.Errorf("lost write (test)")
	}
	return o.Operations.SaveProgress(ctx, op, with, events)
}

func countingHarness(t *testing.T, defs ...Definition) (*harness, *countingOps) {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock()}
	base := newStore(t)
	ops := &countingOps{Operations: base.Operations()}
	h.store = countingStore{Store: base, ops: ops}
	h.eng = h.engine(defs...)
	return h, ops
}

func local(s Step[testData]) StepDef[testData] { return StepDef[testData]{Step: s, Local: true} }

// Local steps have no durable write of their own: consecutive local steps and the step that
// calls out after them share one write (after that step), and the end is one more.
func TestLocalStepsRideOnTheNextWrite(t *testing.T) {
	p, err := Staged("provision", time.Hour,
		Stage[testData]{Name: "prepare", Steps: []StepDef[testData]{local(step("l1", nil)), local(step("l2", nil)), def(step("x1", nil))}},
		Stage[testData]{Name: "create", Steps: []StepDef[testData]{local(step("l3", nil)), def(step("x2", nil)), def(step("x3", nil))}},
	)
	require.NoError(t, err)
	h, ops := countingHarness(t, p)
	op := h.insert("provision", time.Hour)
	require.Equal(t, 1, h.runDue())

	got, data := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, []string{"l1", "l2", "x1", "l3", "x2", "x3"}, data.Trace)
	// After x1 (before l3), after x2 (before x3), the end (which holds x3's outcome).
	assert.Equal(t, int64(3), ops.saves.Load())
	assert.Equal(t, []string{"l1:succeeded", "l2:succeeded", "x1:succeeded", "l3:succeeded", "x2:succeeded", "x3:succeeded"}, eventKinds(h.events(op.ID)))
}

func readOnly(s Step[testData]) StepDef[testData] { return StepDef[testData]{Step: s}.AsReadOnly() }

// Read-only steps' successes ride on the next write like local steps': the status reads between
// two creations share the write after the second creation.
func TestReadOnlyStepsRideOnTheNextWrite(t *testing.T) {
	x2 := &peek{}
	p, err := Staged("provision", time.Hour,
		Stage[testData]{Name: "create", Steps: []StepDef[testData]{def(step("x1", nil))}},
		Stage[testData]{Name: "check", Steps: []StepDef[testData]{readOnly(step("r1", nil)), readOnly(step("r2", nil))}},
		Stage[testData]{Name: "install", Steps: []StepDef[testData]{def(x2.step("x2")), readOnly(step("r3", nil))}},
	)
	require.NoError(t, err)
	h, ops := countingHarness(t, p)
	x2.h = h
	id := h.insert("provision", time.Hour).ID
	x2.id = id
	require.Equal(t, 1, h.runDue())
	before := x2.seen

	got, data := h.get(id)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, []string{"x1", "r1", "r2", "x2", "r3"}, data.Trace)
	assert.True(t, before.Steps["x1"].Done, "x1 created something: written before the next step")
	assert.False(t, before.Steps["r2"].Done, "r1 and r2 only read: no write of their own before x2")
	// After x1 (before r1), after x2 (before r3), the end (which holds r3's outcome).
	assert.Equal(t, int64(3), ops.saves.Load())
	assert.Equal(t, []string{"x1:succeeded", "r1:succeeded", "r2:succeeded", "x2:succeeded", "r3:succeeded"}, eventKinds(h.events(id)))
}

// A crash after a read-only step, before the next write, reads again: the rerun starts at the
// first read whose success was not written, never at a creation that was.
func TestReadOnlyStepsReadAgainAfterALostWrite(t *testing.T) {
	x1, r1, x2 := step("x1", nil), step("r1", nil), step("x2", nil)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(x1), readOnly(r1), def(x2), def(step("x3", nil))}})
	require.NoError(t, err)
	h, id := runLosingTheWriteAfter(t, p, "x2")
	got, _ := h.get(id)
	assert.True(t, got.Progress.Steps["x1"].Done)
	assert.False(t, got.Progress.Steps["r1"].Done, "r1's success was to ride on the lost write")
	h = h.restartedPastTheLease(p)
	h.runDue()
	got, data := h.get(id)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, []string{"x1", "r1", "x2", "x3"}, data.Trace)
	assert.Equal(t, [3]int{1, 2, 2}, [3]int{x1.Runs(), r1.Runs(), x2.Runs()}, "x1 once; the read and the creation after it again")
}

func idempotent(s Step[testData]) StepDef[testData] { return StepDef[testData]{Step: s}.AsIdempotent() }

// runLosingTheWriteAfter runs one operation of p whose first write with step done is lost (the
// worker crashed before it committed) and returns the harness and the operation's ID.
func runLosingTheWriteAfter(t *testing.T, p *Process[testData], step string) (*harness, string) {
	t.Helper()
	h, ops := countingHarness(t, p)
	lost := false
	ops.lose = func(op storage.Operation) bool {
		if op.Progress.Steps[step].Done && !lost {
			lost = true
			return true
		}
		return false
	}
	id := h.insert("provision", time.Hour).ID
	h.runDue()
	require.True(t, lost)
	return h, id
}

// restartedPastTheLease is a new engine on the same store once the lost worker's lease expired.
func (h *harness) restartedPastTheLease(p *Process[testData]) *harness {
	h.clock.Advance(2 * time.Minute)
	again := &harness{t: h.t, store: h.store, clock: h.clock}
	again.eng = again.engine(p)
	return again
}

// Idempotent steps' successes ride on the next write as read-only steps' do; a crash before that
// write runs them again (the same effect), never the creation written before them.
func TestIdempotentStepsRideOnTheNextWrite(t *testing.T) {
	x1, i1, i2, x2 := step("x1", nil), step("i1", nil), step("i2", nil), step("x2", nil)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		def(x1), idempotent(i1), idempotent(i2), def(x2), idempotent(step("i3", nil)),
	}})
	require.NoError(t, err)
	h, id := runLosingTheWriteAfter(t, p, "x2")
	got, _ := h.get(id)
	assert.True(t, got.Progress.Steps["x1"].Done, "x1 created something: written before i1 ran")
	assert.False(t, got.Progress.Steps["i2"].Done, "i1 and i2 had no write of their own: theirs was lost")
	h = h.restartedPastTheLease(p)
	h.runDue()
	got, data := h.get(id)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, []string{"x1", "i1", "i2", "x2", "i3"}, data.Trace)
	assert.Equal(t, [4]int{1, 2, 2, 2}, [4]int{x1.Runs(), i1.Runs(), i2.Runs(), x2.Runs()},
		"x1 once; the idempotent steps and the creation after them again")
}

// A step that calls out is written before the next step runs, even when that step is local:
// the local step sees the outcome already in the row.
func TestNonLocalOutcomeDurableBeforeTheNextStep(t *testing.T) {
	check := &peek{}
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		local(step("l", nil)), def(step("x", nil)), local(check.step("check")),
	}})
	require.NoError(t, err)
	check.h, _ = countingHarness(t, p)
	check.id = check.h.insert("provision", time.Hour).ID
	check.h.runDue()
	assert.True(t, check.seen.Steps["x"].Done, "x is recorded as done before the local step after it runs")
}

// peek makes a step that, when it runs, records the progress its operation's row holds.
type peek struct {
	h    *harness
	id   string
	seen storage.Progress
}

func (p *peek) step(name string) *funcStep {
	return step(name, func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		stored, _ := p.h.get(p.id)
		p.seen = stored.Progress
		op.Data.Trace = append(op.Data.Trace, name)
		return op, 0, nil
	})
}

// A wait writes its operation (due time, attempts) every time, but an event only when what it
// waits for changes; the last wait's message lives in the step's progress, so the rule holds
// across a restart.
func TestWaitEventsOnlyWhenTheMessageChanges(t *testing.T) {
	answers := []string{"", "", "cluster is creating", "cluster is creating", "cluster is creating", "", "done"}
	poll := step("poll", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		a := answers[op.Progress.Steps["poll"].Attempts-1]
		if a == "done" {
			return op, 0, nil
		}
		op.SetLastError(a)
		return op, time.Second, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(poll)}})
	require.NoError(t, err)
	h, ops := countingHarness(t, p)
	op := h.insert("provision", time.Hour)
	for i := range answers {
		if i == 3 {
			h.eng = h.engine(p) // a restart in the middle of identical polls
		}
		require.Equal(t, 1, h.runDue(), "run %d", i)
		h.clock.Advance(time.Second)
	}
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, len(answers), got.Progress.Steps["poll"].Attempts)
	var msgs []string
	for _, e := range h.events(op.ID) {
		msgs = append(msgs, fmt.Sprintf("%s %s", e.Type, e.Message))
	}
	assert.Equal(t, []string{
		"retrying next try at 2026-01-01T12:00:01Z (in 1s), gives up at 2026-01-01T13:00:00Z",
		"retrying next try at 2026-01-01T12:00:03Z (in 1s), gives up at 2026-01-01T13:00:00Z: cluster is creating",
		"retrying next try at 2026-01-01T12:00:06Z (in 1s), gives up at 2026-01-01T13:00:00Z",
		"succeeded ",
	}, msgs)
	// Every wait is written (6), and the end.
	assert.Equal(t, int64(len(answers)), ops.saves.Load())
}

func TestWaitBackoffStretch(t *testing.T) {
	b := WaitBackoff{}.withDefaults()
	assert.Equal(t, 2*time.Second, b.stretch(2*time.Second, 0, false))
	assert.Equal(t, 2*time.Second, b.stretch(2*time.Second, 15*time.Second, false), "never shorter than the step's own interval")
	assert.Equal(t, 10*time.Second, b.stretch(2*time.Second, 100*time.Second, false))
	assert.Equal(t, time.Minute, b.stretch(2*time.Second, time.Hour, false), "capped")
	assert.Equal(t, 5*time.Minute, b.stretch(5*time.Minute, time.Hour, false), "a longer interval of the step's own is kept")
	off := WaitBackoff{WaitBackoffFraction: -1}.withDefaults()
	assert.Equal(t, 2*time.Second, off.stretch(2*time.Second, time.Hour, false))
	custom := WaitBackoff{WaitBackoffFraction: 0.5, MaxWaitInterval: 20 * time.Second}
	assert.Equal(t, 15*time.Second, custom.stretch(2*time.Second, 30*time.Second, false))
	assert.Equal(t, 20*time.Second, custom.stretch(2*time.Second, time.Minute, false))
	// Jitter: the sub-second part of the time waited shortens a stretched interval by up to a fifth.
	assert.Equal(t, 54*time.Second, b.stretch(2*time.Second, time.Hour+500*time.Millisecond, false), "half of the jitter")
	assert.Equal(t, 9045*time.Millisecond, b.stretch(2*time.Second, 100*time.Second+500*time.Millisecond, false))
	assert.Equal(t, 2*time.Second, b.stretch(2*time.Second, 20*time.Second+999*time.Millisecond, false), "never shorter than the step's own interval")
	assert.Equal(t, 2*time.Second, b.stretch(2*time.Second, 15*time.Second+900*time.Millisecond, false), "unstretched waits get no jitter")
	// A wait that is woken when done backs off with its own fraction and cap.
	assert.Equal(t, 50*time.Second, b.stretch(2*time.Second, 100*time.Second, true))
	assert.Equal(t, 10*time.Minute, b.stretch(2*time.Second, time.Hour, true), "capped")
	assert.Equal(t, 2*time.Second, b.stretch(2*time.Second, 3*time.Second, true), "never shorter than the step's own interval")
	assert.Equal(t, 2*time.Second, off.stretch(2*time.Second, time.Hour, true), "off is off")
	plain := WaitBackoff{SignaledWaitBackoffFraction: -1}.withDefaults()
	assert.Equal(t, time.Minute, plain.stretch(2*time.Second, time.Hour, true), "a negative signaled fraction: like any wait")
}

// On a frozen clock: a healthy wait's due time stretches with the time waited, capped; a failing
// retry keeps the step's interval; no run is scheduled past a limit.
func TestLongHealthyWaitsBackOff(t *testing.T) {
	failing := false
	poll := step("poll", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if failing {
			return op.RetryOperation("Provisioner: 503", 2*time.Second, time.Hour)
		}
		return op, 2 * time.Second, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Timeout: 30 * time.Minute, Steps: []StepDef[testData]{def(poll)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)
	dueIn := func() time.Duration { t.Helper(); return h.runOnceDueIn(op.ID) }
	assert.Equal(t, 2*time.Second, dueIn(), "first poll")
	h.clock.Advance(100 * time.Second)
	assert.Equal(t, 10*time.Second, dueIn(), "a tenth of the 100 s waited")
	h.clock.Advance(20 * time.Minute)
	assert.Equal(t, time.Minute, dueIn(), "capped at APP_ENGINE_MAX_WAIT_INTERVAL")
	failing = true
	h.clock.Advance(time.Minute)
	assert.Equal(t, 2*time.Second, dueIn(), "a failing retry keeps its own interval")
	failing = false
	// The jumps above ran the polls late, which the stage limit does not count: from here on
	// every poll runs on time, a minute apart, until the stretched minute is cut at the limit.
	in := time.Minute
	for i := 0; i < 40 && in == time.Minute; i++ {
		got, _ := h.get(op.ID)
		h.clock.Advance(got.DueAt.Sub(h.clock.Now()))
		in = dueIn()
	}
	got, _ := h.get(op.ID)
	limit := got.Progress.StageStartedAt["s"].Add(30*time.Minute + got.Progress.Steps["poll"].Late)
	assert.Less(t, in, time.Minute, "never past a limit")
	assert.Equal(t, limit, h.clock.Now().Add(in), "never past a limit")
}

// A wait whose end wakes the operation backs off with the signaled fraction and cap: the
// embedded provisioner's operations wake the broker's waits, whose polls are only a fallback.
func TestSignaledWaitsBackOffFurther(t *testing.T) {
	poll := step("Check_Runtime", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		op.WaitIsSignaled()
		return op, 2 * time.Second, nil
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(poll)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)
	start := h.clock.Now()
	dueIn := func() time.Duration { t.Helper(); return h.runOnceDueIn(op.ID) }
	assert.Equal(t, 2*time.Second, dueIn())
	h.clock.Advance(2 * time.Second)
	assert.Equal(t, 2*time.Second, dueIn(), "2 s waited: half of it is less than the step's interval")
	h.clock.Advance(2 * time.Second)
	assert.Equal(t, 2*time.Second, dueIn())
	h.clock.Advance(2 * time.Second)
	assert.Equal(t, 3*time.Second, dueIn(), "half of the 6 s waited")
	// From here on the stored due times (microseconds) leave the clock off whole seconds, so
	// intervals carry up to a fifth of jitter.
	in, polls := 3*time.Second, 4
	for ; in < 8*time.Minute && polls < 100; polls++ {
		h.clock.Advance(in)
		in = dueIn()
	}
	for i := 0; i < 5; i++ {
		h.clock.Advance(in)
		in = dueIn()
		assert.LessOrEqual(t, in, 10*time.Minute, "capped at APP_ENGINE_MAX_SIGNALED_WAIT_INTERVAL")
		assert.GreaterOrEqual(t, in, 8*time.Minute)
	}
	// The unsignaled back-off (a tenth, at most a minute) polls ~50 times in the first 20 minutes.
	assert.Less(t, polls, 25, "polls in the first %s", h.clock.Now().Sub(start))
}
