package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Operation is what a step sees: the stored operation with its payload decoded into T.
// The embedded storage.Operation's Data field holds the raw JSON and is rewritten from Data
// by the engine after every step.
type Operation[T any] struct {
	storage.Operation
	Data T

	// step, now and clock are set by the engine before Run so the retry helpers can measure
	// "how long has this step been trying" from the persisted first attempt, at the time of
	// the failure (clock), not at the start of the run (now).
	step  string
	now   time.Time
	clock Clock
	// Set by the retry helpers: this run reported a failure, the end of the step's retry
	// window, and whether the window ends in "not completed" rather than a failure.
	failing     bool
	retryUntil  *time.Time
	withoutFail bool
	// signaled: set by WaitIsSignaled; signalKey by WaitIsSignaledBy.
	signaled  bool
	signalKey string
	// memo: the run's (Memo); shared by every step of one run.
	memo *runMemo
}

// CurrentStep is the name of the step being run.
func (op Operation[T]) CurrentStep() string { return op.step }

// Now is the engine's time at the start of this step run.
func (op Operation[T]) Now() time.Time { return op.now }

// RetryOperation asks to run the step again after interval while the step has been failing for
// less than maxTime (measured from its first attempt or its last healthy run, both of which
// survive restarts, to the time of this failure); afterwards it fails the operation with msg.
// The window's end is recorded in the step's progress: the engine schedules no run past it and
// ends a run's context there.
func (op Operation[T]) RetryOperation(msg string, interval, maxTime time.Duration) (Operation[T], time.Duration, error) {
	op.failing, op.withoutFail = true, false
	op.LastError = msg
	if op.withinRetryTime(maxTime) {
		return op, interval, nil
	}
	return op, 0, fmt.Errorf("%s: step %s gave up after %s", msg, op.step, maxTime)
}

// RetryOperationWithoutFail is RetryOperation for steps that must not block their operation
// (deprovisioning): after maxTime the step is recorded as executed but not completed (with msg
// as its last error) and the operation goes on.
func (op Operation[T]) RetryOperationWithoutFail(msg string, interval, maxTime time.Duration) (Operation[T], time.Duration, error) {
	op.failing, op.withoutFail = true, true
	op.LastError = msg
	if op.withinRetryTime(maxTime) {
		return op, interval, nil
	}
	op.NotCompleted(msg)
	return op, 0, nil
}

// Retry is RetryOperation on a pointer to the operation, for helpers shared by every process.
func (op *Operation[T]) Retry(msg string, interval, maxTime time.Duration) (time.Duration, error) {
	out, wait, err := op.RetryOperation(msg, interval, maxTime)
	*op = out
	return wait, err
}

// WaitIsSignaled says that what this run's wait waits for wakes the operation when it is done
// (storage.Operations.Wake: the embedded provisioner's finished operations wake the broker's
// operations polling them), so the wait's polls are only a fallback for a lost wake: a long
// healthy wait backs off with WaitBackoff's signaled fraction and cap.
func (op *Operation[T]) WaitIsSignaled() { op.signaled = true }

// WaitIsSignaledBy is WaitIsSignaled where the end of the wait is signalled in this process
// with key (Signals.Signal): the run may wait in memory for it instead of being written and
// claimed again (Signals). An empty key is WaitIsSignaled.
func (op *Operation[T]) WaitIsSignaledBy(key string) { op.signaled, op.signalKey = true, key }

// WaitSignaled reports whether this run said WaitIsSignaled.
func (op Operation[T]) WaitSignaled() bool { return op.signaled }

// SetLastError notes why the step waits, for helpers shared by every process.
func (op *Operation[T]) SetLastError(msg string) { op.LastError = msg }

// NotCompleted records the step as executed but not completed at once, with msg as its last
// error, and lets the operation go on: for an answer that waiting will not change, or what a
// process this step waited for left behind. Unlike a retry window of 0 it does not depend on the
// clock having moved since the step's first attempt.
func (op *Operation[T]) NotCompleted(msg string) {
	op.failing, op.withoutFail = true, true
	op.LastError = msg
	if !slices.Contains(op.Progress.ExecutedButNotCompleted, op.step) {
		// A new slice: the engine's copy of the progress must not change behind its back.
		op.Progress.ExecutedButNotCompleted = append(slices.Clone(op.Progress.ExecutedButNotCompleted), op.step)
	}
}

// RetryWithoutFail is RetryOperationWithoutFail on a pointer to the operation.
func (op *Operation[T]) RetryWithoutFail(msg string, interval, maxTime time.Duration) time.Duration {
	out, wait, _ := op.RetryOperationWithoutFail(msg, interval, maxTime)
	*op = out
	return wait
}

// withinRetryTime records the end of the step's retry window and reports whether the failure
// happens before it.
func (op *Operation[T]) withinRetryTime(maxTime time.Duration) bool {
	now := op.now
	if op.clock != nil {
		now = op.clock.Now().UTC()
	}
	until := retryWindowStart(op.Progress.Steps[op.step], op.now).Add(maxTime)
	op.retryUntil = &until
	return now.Before(until)
}

// retryWindowStart is where a step's retry window starts: its last healthy run, else its first
// attempt (else fallback, for a step run outside the engine).
func retryWindowStart(sp storage.StepProgress, fallback time.Time) time.Time {
	from := sp.FirstAttempt
	if sp.LastHealthy.After(from) {
		from = sp.LastHealthy
	}
	if from.IsZero() {
		return fallback
	}
	return from
}

// NewOperation builds a pending operation, due now, with its deadline (timeout from now) and
// data encoded as JSON; insert it with storage.Operations.InsertOperation.
func NewOperation(opType, instanceID string, data any, timeout time.Duration, now time.Time) (storage.Operation, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return storage.Operation{}, fmt.Errorf("encoding %s operation data: %w", opType, err)
	}
	now = now.UTC().Truncate(time.Microsecond)
	return storage.Operation{
		ID:         uuid.NewString(),
		InstanceID: instanceID,
		Type:       opType,
		State:      storage.StatePending,
		CreatedAt:  now,
		DueAt:      &now,
		Deadline:   now.Add(timeout),
		Data:       raw,
	}, nil
}

// ForStep returns op as the engine hands it to step at time now. Step unit tests use it to
// exercise retry paths without an engine.
func (op Operation[T]) ForStep(step string, now time.Time) Operation[T] {
	op.step, op.now = step, now
	return op
}
