package engine

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangUntilDone is a step whose call hangs until the run's context ends (a system that does
// not answer) and then reports the failure through RetryOperation.
func hangUntilDone(msg string, window time.Duration) runFunc {
	return func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		<-ctx.Done()
		return op.RetryOperation(msg, time.Second, window)
	}
}

func lastEvent(t *testing.T, store storage.Store, id string) storage.Event {
	t.Helper()
	page, err := store.Events().ListEvents(context.Background(), storage.EventFilter{OperationIDs: []string{id}, Paging: storage.Paging{PageSize: 1000}})
	require.NoError(t, err)
	require.NotEmpty(t, page.Items)
	return page.Items[len(page.Items)-1]
}

// A stage limit ends the step that is running, not only the next run, and the failure names
// the step, the limit and the system's last answer.
func TestStageLimitEndsTheRunningStepAndNamesItsLastError(t *testing.T) {
	register := step("Register_Runtime", hangUntilDone("Director: registering runtime: HTTP 500", time.Hour))
	p, err := Staged("provisioner_provision", time.Hour, Stage[testData]{
		Name: "WaitingForClusterDomain", Timeout: 300 * time.Millisecond, Steps: []StepDef[testData]{def(register)},
	})
	require.NoError(t, err)
	store := newStore(t)
	// The default run timeout (30s) is far beyond the test: only the stage limit can end the run.
	liveEngine(t, store, Config{Workers: 1}, p)
	op := insertNow(t, store, "provisioner_provision")
	got := waitState(t, store, op.ID, storage.StateFailed, 10*time.Second)
	want := "step Register_Runtime: stage WaitingForClusterDomain exceeded its time limit of 300ms; last error: Director: registering runtime: HTTP 500"
	assert.Equal(t, want, got.Description)
	assert.Equal(t, want, got.LastError)
	assert.Equal(t, 1, register.Runs(), "a run cut short by a limit is a verdict, not a release to run again")
	ev := lastEvent(t, store, op.ID)
	assert.Equal(t, storage.EventFailed, ev.Type)
	assert.Equal(t, "Register_Runtime", ev.Step)
	assert.Equal(t, want, ev.Message)
}

// The operation deadline ends a running step too.
func TestDeadlineEndsTheRunningStep(t *testing.T) {
	wait := step("Wait_For_Cluster_Deletion", hangUntilDone("Director: deleting runtime: HTTP 503", time.Hour))
	p, err := Staged("provisioner_deprovision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(wait)}})
	require.NoError(t, err)
	store := newStore(t)
	liveEngine(t, store, Config{Workers: 1}, p)
	op, err := NewOperation("provisioner_deprovision", "instance-1", testData{}, 300*time.Millisecond, time.Now())
	require.NoError(t, err)
	_, err = store.Operations().InsertOperation(context.Background(), op)
	require.NoError(t, err)
	got := waitState(t, store, op.ID, storage.StateFailed, 10*time.Second)
	assert.Contains(t, got.Description, "step Wait_For_Cluster_Deletion: operation exceeded its deadline")
	assert.Contains(t, got.Description, "; last error: Director: deleting runtime: HTTP 503")
	assert.Equal(t, 1, wait.Runs())
}

// Once a step has failed, the end of its retry window ends a later run that hangs.
func TestRetryWindowEndsTheRunningStep(t *testing.T) {
	runs := 0
	flaky := step("Create_Evaluation", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		runs++
		if runs > 1 {
			<-ctx.Done() // hangs until the window's end, not the 30s run timeout
		}
		return op.RetryOperation("AVS: creating evaluation: HTTP 500", time.Millisecond, 300*time.Millisecond)
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(flaky)}})
	require.NoError(t, err)
	store := newStore(t)
	liveEngine(t, store, Config{Workers: 1}, p)
	op := insertNow(t, store, "provision")
	got := waitState(t, store, op.ID, storage.StateFailed, 10*time.Second)
	assert.Equal(t, "AVS: creating evaluation: HTTP 500: step Create_Evaluation gave up after 300ms", got.Description)
	assert.Equal(t, 2, flaky.Runs())
}

// StepRunTimeout bounds every run of a step that sets no RunTimeout of its own.
func TestDefaultRunTimeoutBoundsEveryRun(t *testing.T) {
	attempts := 0
	hanging := step("hanging", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		attempts++
		if attempts == 1 {
			<-ctx.Done()
			return op.RetryOperation("call timed out", time.Millisecond, time.Minute)
		}
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(hanging)}})
	require.NoError(t, err)
	store := newStore(t)
	liveEngine(t, store, Config{Workers: 1, StepRunTimeout: 50 * time.Millisecond}, p)
	op := insertNow(t, store, "provision")
	waitState(t, store, op.ID, storage.StateSucceeded, 10*time.Second)
	assert.Equal(t, 2, attempts)
}

// The retry helpers judge the window at the failure, not at the run's start: a run that began
// inside a 1-minute window and failed 2 minutes later gives up at once.
func TestRetryWindowIsJudgedAtTheFailure(t *testing.T) {
	var h *harness
	slow := step("Register_Runtime", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		h.clock.Advance(2 * time.Minute) // a call that took 2 minutes
		return op.RetryOperation("Director: HTTP 500", 10*time.Second, time.Minute)
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(slow)}})
	require.NoError(t, err)
	h = newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)
	h.runDue()
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, "Director: HTTP 500: step Register_Runtime gave up after 1m0s", got.Description)
	assert.Equal(t, "Director: HTTP 500", got.Progress.Steps["Register_Runtime"].LastError)
	assert.Equal(t, 1, slow.Runs())
}

// The window's end caps the next run's due time; reaching it is a verdict without another run.
func TestRetryWindowCapsTheNextRun(t *testing.T) {
	flaky := step("Create_Evaluation", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op.RetryOperation("AVS: HTTP 503", 50*time.Second, time.Minute)
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(flaky)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)
	got := h.runToCappedLimit(op.ID, 50*time.Second, h.clock.Now().Add(time.Minute))
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, "step Create_Evaluation: gave up after its retry window of 1m0s; last error: AVS: HTTP 503", got.Description)
	assert.Equal(t, 2, flaky.Runs())
}

// A healthy wait after failures opens a new window later: the recorded end is dropped.
func TestHealthyWaitClearsTheRetryWindow(t *testing.T) {
	check := step("Check_Runtime", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if op.Progress.Steps["Check_Runtime"].Attempts > 1 {
			return op, time.Minute, nil // healthy polls after one failure
		}
		return op.RetryOperation("Director: HTTP 500", time.Minute, 5*time.Minute)
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(check)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)
	h.runDue()
	got, _ := h.get(op.ID)
	require.NotNil(t, got.Progress.Steps["Check_Runtime"].RetryUntil)
	for i := 0; i < 10; i++ {
		h.clock.Advance(time.Minute)
		h.runDue()
	}
	got, _ = h.get(op.ID)
	assert.Equal(t, storage.StateInProgress, got.State, "healthy polls are not bound by the old window")
	assert.Nil(t, got.Progress.Steps["Check_Runtime"].RetryUntil)
}

// A deprovisioning that left resources behind says what and why in its description and in
// its succeeded event: steps given up by the engine at their window's end and steps whose
// helper gave up within a run alike.
func TestSucceededDescriptionNamesWhatWasLeft(t *testing.T) {
	var h *harness
	ias := step("IAS_Deregistration", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op.RetryOperationWithoutFail("IAS: deleting the service provider: HTTP 500", 30*time.Second, time.Minute)
	})
	avs := step("Deprovision_AVS", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		h.clock.Advance(2 * time.Minute) // one call that outlasted the window
		return op.RetryOperationWithoutFail("AVS: deleting evaluation: HTTP 503", 30*time.Second, time.Minute)
	})
	last := step("Remove_Runtime", nil)
	p, err := Weighted("deprovision", 24*time.Hour,
		WeightedStep[testData]{Weight: 1, StepDef: def(ias)},
		WeightedStep[testData]{Weight: 2, StepDef: def(avs)},
		WeightedStep[testData]{Weight: 10, StepDef: def(last)})
	require.NoError(t, err)
	h = newHarness(t, p)
	op := h.insert("deprovision", 24*time.Hour)
	for i := 0; i < 10 && last.Runs() == 0; i++ {
		h.runDue()
		h.clock.Advance(30 * time.Second)
	}
	got, _ := h.get(op.ID)
	require.Equal(t, storage.StateSucceeded, got.State)
	want := "operation succeeded; not completed: IAS_Deregistration (IAS: deleting the service provider: HTTP 500), " +
		"Deprovision_AVS (AVS: deleting evaluation: HTTP 503)"
	assert.Equal(t, want, got.Description)
	assert.Equal(t, []string{"IAS_Deregistration", "Deprovision_AVS"}, got.Progress.ExecutedButNotCompleted)
	assert.Equal(t, 1, avs.Runs())
	ev := lastEvent(t, h.store, op.ID)
	assert.Equal(t, storage.EventSucceeded, ev.Type)
	assert.Equal(t, "", ev.Step, "the operation's own event")
	assert.Equal(t, want, ev.Message)
}

// A plain success keeps its plain description and writes no extra event.
func TestSucceededDescriptionWithNothingLeft(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)
	h.runDue()
	got, _ := h.get(op.ID)
	assert.Equal(t, "operation succeeded", got.Description)
	assert.Equal(t, []string{"x:succeeded"}, eventKinds(h.events(op.ID)))
}

// NotCompleted gives a step up at once, on its first run and with the clock standing still (a
// retry window of 0 did so only once the clock had moved past the first attempt).
func TestNotCompletedAtOnce(t *testing.T) {
	edp := step("EDP_Deregistration", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		op.NotCompleted("EDP: deregistering: HTTP 403")
		return op, 0, nil
	})
	last := step("Remove_Runtime", nil)
	p, err := Weighted("deprovision", time.Hour,
		WeightedStep[testData]{Weight: 1, StepDef: def(edp)},
		WeightedStep[testData]{Weight: 2, StepDef: def(last)})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("deprovision", time.Hour)
	h.runDue()
	got, _ := h.get(op.ID)
	require.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, "operation succeeded; not completed: EDP_Deregistration (EDP: deregistering: HTTP 403)", got.Description)
	assert.Equal(t, 1, edp.Runs())
	assert.Equal(t, 1, last.Runs())
}

// Time a waiting step's runs spend past their due time, waiting for a worker (a backlog, or
// no broker running), does not count against its stage's limit: at 100,000 in flight polls ran
// minutes late and provisionings failed with "exceeded its time limit" while their clusters
// were on time. The limit still ends a wait that is really too long, and says what it did not
// count.
func TestStageLimitDoesNotCountTimeWaitingForAWorker(t *testing.T) {
	var h *harness
	polls := 0
	ready := 0 // the poll that finds the domain; 0: never
	wait := step("Check_Cluster_Domain", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		polls++
		if polls == ready {
			return op, 0, nil
		}
		return op, time.Minute, nil
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{
		Name: "WaitingForClusterDomain", Timeout: 10 * time.Minute, Steps: []StepDef[testData]{def(wait)},
	})
	require.NoError(t, err)

	t.Run("a late poll finds the domain", func(t *testing.T) {
		h, polls, ready = newHarness(t, p), 0, 4
		op := h.insert("provision", 24*time.Hour)
		h.runDue()
		h.clock.Advance(time.Minute)
		h.runDue()
		// The engine falls 15 minutes behind before the third poll.
		h.clock.Advance(16 * time.Minute)
		h.runDue()
		got, _ := h.get(op.ID)
		require.Equal(t, storage.StateInProgress, got.State, got.Description)
		assert.Equal(t, 15*time.Minute, got.Progress.Steps["Check_Cluster_Domain"].Late)
		h.clock.Advance(time.Minute)
		h.runDue()
		got, _ = h.get(op.ID)
		assert.Equal(t, storage.StateSucceeded, got.State, got.Description)
		assert.Equal(t, 4, polls)
	})

	t.Run("a domain that never comes", func(t *testing.T) {
		h, polls, ready = newHarness(t, p), 0, 0
		op := h.insert("provision", 24*time.Hour)
		start := h.clock.Now()
		h.runDue()
		h.clock.Advance(3 * time.Minute) // 2 minutes late
		h.runDue()
		got, _ := h.get(op.ID)
		require.Equal(t, storage.StateInProgress, got.State)
		assert.Equal(t, 2*time.Minute, got.Progress.Steps["Check_Cluster_Domain"].Late)
		for got.State == storage.StateInProgress && h.clock.Now().Before(start.Add(time.Hour)) {
			require.NotNil(t, got.DueAt)
			h.clock.Advance(got.DueAt.Sub(h.clock.Now())) // on time from here on
			h.runDue()
			got, _ = h.get(op.ID)
		}
		assert.Equal(t, storage.StateFailed, got.State)
		assert.Equal(t, start.Add(12*time.Minute), h.clock.Now(), "the 10-minute limit moved by the 2 minutes late")
		assert.Equal(t, "step Check_Cluster_Domain: stage WaitingForClusterDomain exceeded its time limit of 10m0s "+
			"(not counting 2m0s its runs waited for a worker)", got.Description)
	})

	t.Run("a poll a moment late is on time", func(t *testing.T) {
		h, polls, ready = newHarness(t, p), 0, 0
		op := h.insert("provision", 24*time.Hour)
		h.runDue()
		h.clock.Advance(time.Minute + 500*time.Millisecond)
		h.runDue()
		got, _ := h.get(op.ID)
		assert.Zero(t, got.Progress.Steps["Check_Cluster_Domain"].Late)
	})
}
