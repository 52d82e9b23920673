package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitOnce asks to wait on each operation's first attempt of the step.
func waitOnce(wait time.Duration) runFunc {
	return func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		if op.Progress.Steps[op.CurrentStep()].Attempts == 1 {
			return op, wait, nil
		}
		op.Data.Trace = append(op.Data.Trace, op.CurrentStep())
		return op, 0, nil
	}
}

func TestStagesRunInOrderAndFinishedStagesNeverRerun(t *testing.T) {
	a1, a2 := step("a1", nil), step("a2", nil)
	b1 := step("b1", waitOnce(time.Minute))
	c1 := step("c1", nil)
	p, err := Staged("provision", time.Hour,
		Stage[testData]{Name: "create_runtime", Steps: []StepDef[testData]{def(a1), def(a2)}},
		Stage[testData]{Name: "check_runtime", Steps: []StepDef[testData]{def(b1)}},
		Stage[testData]{Name: "post_actions", Steps: []StepDef[testData]{def(c1)}},
	)
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)

	require.Equal(t, 1, h.runDue())
	got, data := h.get(op.ID)
	assert.Equal(t, storage.StateInProgress, got.State)
	assert.Equal(t, []string{"create_runtime"}, got.Progress.FinishedStages)
	assert.Equal(t, "check_runtime", got.Stage)
	assert.Equal(t, []string{"a1", "a2"}, data.Trace)
	assert.Empty(t, got.LeaseOwner, "a waiting operation is released")
	require.NotNil(t, got.DueAt)
	assert.Equal(t, h.clock.Now().Add(time.Minute), *got.DueAt)

	assert.Equal(t, 0, h.runDue(), "not due before its wait is over")
	h.clock.Advance(time.Minute)
	// A restart in between: a new engine continues from the row.
	h.eng = h.engine(p)
	require.Equal(t, 1, h.runDue())

	got, data = h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Nil(t, got.DueAt)
	assert.Equal(t, []string{"create_runtime", "check_runtime", "post_actions"}, got.Progress.FinishedStages)
	assert.Equal(t, []string{"a1", "a2", "b1", "c1"}, data.Trace)
	assert.Equal(t, 1, a1.Runs())
	assert.Equal(t, 1, a2.Runs())
	assert.Equal(t, 2, b1.Runs())
	assert.Equal(t, 2, got.Progress.Steps["b1"].Attempts)
	// One event per step run, at its end; no "started" events.
	assert.Equal(t, []string{
		"a1:succeeded", "a2:succeeded", "b1:retrying", "b1:succeeded", "c1:succeeded",
	}, eventKinds(h.events(op.ID)))
}

func TestWeightedProcessOrdersByWeight(t *testing.T) {
	var order []string
	rec := func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		order = append(order, op.CurrentStep())
		return op, 0, nil
	}
	p, err := Weighted("deprovision", time.Hour,
		WeightedStep[testData]{Weight: 10, StepDef: def(step("Remove_Runtime", rec))},
		WeightedStep[testData]{Weight: 1, StepDef: def(step("Deprovision_Initialization", rec))},
		WeightedStep[testData]{Weight: 5, StepDef: def(step("Deregister_Cluster", rec))},
		WeightedStep[testData]{Weight: 1, StepDef: def(step("EDP_Deregistration", rec))},
	)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{
		"weight_1":  {"Deprovision_Initialization", "EDP_Deregistration"},
		"weight_5":  {"Deregister_Cluster"},
		"weight_10": {"Remove_Runtime"},
	}, p.Stages())
	h := newHarness(t, p)
	op := h.insert("deprovision", time.Hour)
	h.runDue()
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, []string{"Deprovision_Initialization", "EDP_Deregistration", "Deregister_Cluster", "Remove_Runtime"}, order)
	assert.Equal(t, []string{"weight_1", "weight_5", "weight_10"}, got.Progress.FinishedStages)
}

func TestDefinitionErrors(t *testing.T) {
	_, err := Weighted("deprovision", time.Hour, WeightedStep[testData]{Weight: 0, StepDef: def(step("x", nil))})
	assert.ErrorContains(t, err, "step x: weight must be >= 1")
	_, err = Staged("provision", time.Hour, Stage[testData]{Name: "a", Steps: []StepDef[testData]{def(step("x", nil))}},
		Stage[testData]{Name: "b", Steps: []StepDef[testData]{def(step("x", nil))}})
	assert.ErrorContains(t, err, "step x defined twice")
	_, err = Staged("provision", 0, Stage[testData]{Name: "a", Steps: []StepDef[testData]{def(step("x", nil))}})
	assert.ErrorContains(t, err, "timeout must be positive")
	_, err = Staged[testData]("provision", time.Hour, Stage[testData]{Name: "a"})
	assert.ErrorContains(t, err, "stage a has no steps")
}

func TestRetryOperationKeepsItsDeadlineAcrossRestarts(t *testing.T) {
	flaky := step("AVS_Create_Internal_Eval_Step", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op.RetryOperation("AVS unavailable", time.Minute, 5*time.Minute)
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "create_runtime", Steps: []StepDef[testData]{def(flaky)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)

	for i := 0; i < 5; i++ {
		require.Equal(t, 1, h.runDue())
		got, _ := h.get(op.ID)
		require.Equal(t, storage.StateInProgress, got.State, "attempt %d", i+1)
		require.NotNil(t, got.Progress.Steps["AVS_Create_Internal_Eval_Step"].RetryUntil)
		assert.Equal(t, op.CreatedAt.Add(5*time.Minute), *got.Progress.Steps["AVS_Create_Internal_Eval_Step"].RetryUntil, "the window's end is in the row")
		assert.Equal(t, "AVS unavailable", got.LastError)
		h.clock.Advance(time.Minute)
		h.eng = h.engine(p) // restart: the first attempt time comes from the row, not memory
	}
	// At the window's end the engine gives up without another run.
	require.Equal(t, 1, h.runDue())
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, "step AVS_Create_Internal_Eval_Step: gave up after its retry window of 5m0s; last error: AVS unavailable", got.LastError)
	assert.Equal(t, got.LastError, got.Description)
	assert.Equal(t, 5, flaky.Runs())
	assert.Equal(t, 5, got.Progress.Steps["AVS_Create_Internal_Eval_Step"].Attempts)
	ev := h.events(op.ID)
	assert.Equal(t, storage.EventFailed, ev[len(ev)-1].Type)
	assert.Equal(t, "AVS_Create_Internal_Eval_Step", ev[len(ev)-1].Step)
	assert.Equal(t, got.LastError, ev[len(ev)-1].Message)
	assert.Equal(t, storage.EventRetrying, ev[len(ev)-2].Type)
	assert.Equal(t, "next try at 2026-01-01T12:01:00Z (in 1m0s), gives up at 2026-01-01T12:05:00Z: AVS unavailable", ev[len(ev)-2].Message)
	assert.Equal(t, time.Minute, ev[len(ev)-2].Wait)
}

// A step that waits healthily for longer than its retry window (polling a long provisioning)
// and then meets one failure is retried, not failed: the window starts at its last healthy run.
func TestRetryWindowStartsAfterTheLastHealthyWait(t *testing.T) {
	polls := 0
	check := step("Check_Runtime", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		polls++
		if polls <= 10 {
			return op, time.Minute, nil // still provisioning
		}
		return op.RetryOperation("Director unavailable", time.Minute, 5*time.Minute)
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "check_runtime", Steps: []StepDef[testData]{def(check)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)
	for i := 0; i < 11; i++ {
		require.Equal(t, 1, h.runDue())
		h.clock.Advance(time.Minute)
	}
	got, _ := h.get(op.ID)
	require.Equal(t, storage.StateInProgress, got.State, "10 minutes of healthy polls do not use up the 5-minute window")
	assert.Equal(t, "Director unavailable", got.LastError)
	for i := 0; i < 10 && got.State == storage.StateInProgress; i++ {
		h.eng = h.engine(p) // the window start survives restarts
		h.runDue()
		h.clock.Advance(time.Minute)
		got, _ = h.get(op.ID)
	}
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, 14, polls, "last healthy poll at 9m, failures from 10m to 13m, given up at 14m: 5 minutes later")
	assert.Equal(t, "step Check_Runtime: gave up after its retry window of 5m0s; last error: Director unavailable", got.LastError)
}

func TestRetryOperationWithoutFailLetsTheOperationGoOn(t *testing.T) {
	stuck := step("IAS_Deregistration", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op.RetryOperationWithoutFail("IAS returned 503", 30*time.Second, 2*time.Minute)
	})
	last := step("Remove_Runtime", nil)
	p, err := Weighted("deprovision", 24*time.Hour,
		WeightedStep[testData]{Weight: 1, StepDef: def(stuck)},
		WeightedStep[testData]{Weight: 10, StepDef: def(last)})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("deprovision", 24*time.Hour)
	for i := 0; i < 10 && last.Runs() == 0; i++ {
		h.runDue()
		h.clock.Advance(30 * time.Second)
	}
	got, data := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, []string{"IAS_Deregistration"}, got.Progress.ExecutedButNotCompleted)
	assert.Equal(t, []string{"Remove_Runtime"}, data.Trace)
	assert.Equal(t, 4, stuck.Runs(), "tried at 0, 30s, 60s, 90s, then gave up at 120s")
	var msg string
	for _, e := range h.events(op.ID) {
		if e.Step == "IAS_Deregistration" && e.Type == storage.EventSucceeded {
			msg = e.Message
		}
	}
	assert.Equal(t, "executed but not completed: IAS returned 503", msg)
}

func TestStepErrorFailsOperationAndLaterStepsNeverRun(t *testing.T) {
	bad := step("Create_Runtime", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op, 0, errors.New("provisioner rejected the input: region is invalid")
	})
	after := step("Check_Runtime", nil)
	p, err := Staged("provision", time.Hour,
		Stage[testData]{Name: "create_runtime", Steps: []StepDef[testData]{def(bad)}},
		Stage[testData]{Name: "check_runtime", Steps: []StepDef[testData]{def(after)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)
	h.runDue()
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, "provisioner rejected the input: region is invalid", got.LastError)
	assert.Equal(t, got.LastError, got.Description)
	assert.Nil(t, got.DueAt)
	assert.Empty(t, got.LeaseOwner)
	assert.Equal(t, 0, after.Runs())
	assert.Equal(t, 0, h.runDue(), "a failed operation is never claimed again")
}

func TestPanickingStepFailsOnlyItsOperation(t *testing.T) {
	boom := step("boom", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		var m map[string]int
		m["x"] = 1 // nil map write
		return op, 0, nil
	})
	bad, err := Staged("upgrade_kyma", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(boom)}})
	require.NoError(t, err)
	good, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("fine", nil))}})
	require.NoError(t, err)
	h := newHarness(t, bad, good)
	opBad := h.insert("upgrade_kyma", time.Hour)
	opGood := h.insert("provision", time.Hour)
	assert.Equal(t, 2, h.runDue())
	got, _ := h.get(opBad.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Contains(t, got.LastError, "step boom panicked: assignment to entry in nil map")
	got, _ = h.get(opGood.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
}

func TestConditionSkipsStep(t *testing.T) {
	skipped := step("Get_Kubeconfig", nil)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "create_kyma", Steps: []StepDef[testData]{
		{Step: skipped, Condition: func(op Operation[testData]) bool { return op.Data.Value == 2 }},
		def(step("after", nil)),
	}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)
	h.runDue()
	got, data := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, 0, skipped.Runs())
	assert.True(t, got.Progress.Steps["Get_Kubeconfig"].Skipped)
	assert.Equal(t, []string{"after"}, data.Trace)
	assert.Equal(t, []string{"Get_Kubeconfig:skipped", "after:succeeded"}, eventKinds(h.events(op.ID)))
}

func TestStepTimeLimitMeasuredFromFirstAttempt(t *testing.T) {
	slow := step("Check_Cluster_Configuration", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op, 10 * time.Minute, nil // asks for a wait longer than its limit allows
	})
	p, err := Staged("provision", 24*time.Hour, Stage[testData]{Name: "create_kyma", Steps: []StepDef[testData]{
		{Step: slow, Timeout: 15 * time.Minute},
	}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", 24*time.Hour)
	got := h.runToCappedLimit(op.ID, 10*time.Minute, h.clock.Now().Add(15*time.Minute))
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, "step Check_Cluster_Configuration: exceeded its time limit of 15m0s", got.LastError)
	assert.Equal(t, 2, slow.Runs())
}

func TestStageTimeLimitNamesTheStage(t *testing.T) {
	waiting := step("WaitForClusterCreation", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op, time.Minute, nil
	})
	p, err := Staged("provisioner_provision", 24*time.Hour,
		Stage[testData]{Name: "WaitingForClusterDomain", Steps: []StepDef[testData]{def(step("domain", nil))}},
		Stage[testData]{Name: "WaitingForClusterCreation", Timeout: 3 * time.Minute, Steps: []StepDef[testData]{def(waiting)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provisioner_provision", 24*time.Hour)
	for i := 0; i < 10; i++ {
		h.runDue()
		h.eng = h.engine(p)
		h.clock.Advance(time.Minute)
	}
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, "step WaitForClusterCreation: stage WaitingForClusterCreation exceeded its time limit of 3m0s", got.LastError)
	assert.Equal(t, 3, waiting.Runs())
}

func TestOperationDeadlineFailsWaitingOperation(t *testing.T) {
	waiting := step("Upgrade_Runtime", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		return op, 2 * time.Hour, nil
	})
	p, err := Staged("upgrade_kyma", 3*time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(waiting)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("upgrade_kyma", 3*time.Hour)
	got := h.runToCappedLimit(op.ID, 2*time.Hour, op.Deadline)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.True(t, strings.HasPrefix(got.LastError, "step Upgrade_Runtime: operation exceeded its deadline"), got.LastError)
}

func TestSweeperFailsOverdueOperationsNobodyRuns(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	h := newHarness(t, p)
	// An operation of a type this replica does not run, and one held by a dead replica.
	orphan := h.insert("suspension", time.Hour)
	held := h.insert("provision", time.Hour)
	now := h.clock.Now()
	claimed, err := h.store.Operations().ClaimOperations(context.Background(), storage.ClaimRequest{
		Owner: "dead-replica", Types: []string{"provision"}, Now: now, LeaseUntil: now.Add(2 * time.Hour), Limit: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	h.clock.Advance(61 * time.Minute)
	n, err := h.eng.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a live lease is left to its holder")
	got, _ := h.get(orphan.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Equal(t, "operation exceeded its deadline", got.LastError)
	ev := h.events(orphan.ID)
	require.Len(t, ev, 1)
	assert.Equal(t, storage.EventFailed, ev[0].Type)

	h.clock.Advance(time.Hour) // the dead replica's lease expires
	n, err = h.eng.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, _ = h.get(held.ID)
	assert.Equal(t, storage.StateFailed, got.State)
}

func TestExpiredLeaseMakesOperationClaimableAgain(t *testing.T) {
	s := step("x", nil)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(s)}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)
	now := h.clock.Now()
	_, err = h.store.Operations().ClaimOperations(context.Background(), storage.ClaimRequest{
		Owner: "dead-replica", Now: now, LeaseUntil: now.Add(30 * time.Second), Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, 0, h.runDue(), "held by another replica")
	h.clock.Advance(31 * time.Second)
	assert.Equal(t, 1, h.runDue())
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
}

func TestStepCannotOverwriteEngineFields(t *testing.T) {
	rogue := step("rogue", func(_ context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
		op.Version = 999
		op.State = storage.StateSucceeded
		op.Progress.FinishedStages = []string{"everything"}
		op.Data.Value = 7
		return op, 0, nil
	})
	p, err := Staged("provision", time.Hour,
		Stage[testData]{Name: "a", Steps: []StepDef[testData]{def(rogue)}},
		Stage[testData]{Name: "b", Steps: []StepDef[testData]{def(step("b1", nil))}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op := h.insert("provision", time.Hour)
	h.runDue()
	got, data := h.get(op.ID)
	assert.Equal(t, storage.StateSucceeded, got.State)
	assert.Equal(t, []string{"a", "b"}, got.Progress.FinishedStages)
	assert.Equal(t, 7, data.Value)
	assert.Equal(t, []string{"b1"}, data.Trace)
}

func TestUndecodableDataFailsWithReason(t *testing.T) {
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{def(step("x", nil))}})
	require.NoError(t, err)
	h := newHarness(t, p)
	op, err := NewOperation("provision", "i", map[string]any{"value": "not a number"}, time.Hour, h.clock.Now())
	require.NoError(t, err)
	_, err = h.store.Operations().InsertOperation(context.Background(), op)
	require.NoError(t, err)
	h.runDue()
	got, _ := h.get(op.ID)
	assert.Equal(t, storage.StateFailed, got.State)
	assert.Contains(t, got.LastError, "decoding operation data")
}
