package storage

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Stored states of an orchestration's operation (one runtime's upgrade). Once started, the state
// shown is the engine operation's (in progress, succeeded, failed): see OrchestrationOperation.State.
const (
	OrchOpPending   = "pending"
	OrchOpRetrying  = "retrying"
	OrchOpStarted   = "started"
	OrchOpCanceled  = "canceled"
	OrchOpSucceeded = "succeeded"
	OrchOpFailed    = "failed"
	OrchOpRunning   = "in progress"
	// OrchOpSkipped: the instance was deprovisioned, or its deprovisioning was accepted, before
	// the row's turn; the upgrade was never started and does not count as a failure.
	OrchOpSkipped = "skipped"
)

// SkippedError is returned by StartOrchestrationOperation when it marked the row skipped instead
// of starting the upgrade (the skip is committed).
type SkippedError struct {
	// DeprovisioningID: the instance's deprovisioning operation ("" when none is recorded).
	DeprovisioningID string
	Reason           string
}

func (e *SkippedError) Error() string { return "upgrade skipped: " + e.Reason }

// ErrWorkersBusy is returned by StartOrchestrationOperation when the orchestration already runs
// as many operations as it has workers.
var ErrWorkersBusy = errors.New("every worker of the orchestration is busy")

// ErrOrchestrationState is returned when an orchestration's state does not allow the change
// (canceling a finished one, retrying one without failed operations).
var ErrOrchestrationState = errors.New("state conflict")

// Orchestration is a persisted upgrade across the fleet.
type Orchestration struct {
	ID          string
	Type        string
	State       string
	Description string
	// Parameters: the request (common/orchestration.Parameters), as JSON.
	Parameters json.RawMessage
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// OrchestrationOperation is one selected runtime of an orchestration. OperationID is chosen when
// the runtime is selected (and again when it is retried): the engine operation is inserted with
// that ID in the same transaction that marks the row started, so a restart never starts it twice.
type OrchestrationOperation struct {
	OrchestrationID string
	InstanceID      string
	RuntimeID       string
	GlobalAccountID string
	SubAccountID    string
	Region          string
	PlanID          string
	OperationID     string
	// StoredState is the row's own state (OrchOp*); State is what operators see: the engine
	// operation's state once started ("in progress" while pending or running).
	StoredState string
	State       string
	Description string
	Attempts    int
	DueAt       time.Time
	StartedAt   *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// OrchestrationFilter: empty States do not filter; newest first.
type OrchestrationFilter struct {
	States []string
	Paging
}

// OrchestrationOperationFilter filters on the shown state; ordered by instance creation order
// (the order rows were selected in).
type OrchestrationOperationFilter struct {
	States []string
	Paging
}

// CancelResult is what CancelOrchestration did.
type CancelResult struct {
	State    string
	Canceled int
}

// Orchestrations stores orchestrations and their operations.
type Orchestrations interface {
	// InsertOrchestration stores the orchestration and its operations in one transaction.
	InsertOrchestration(ctx context.Context, o Orchestration, ops []OrchestrationOperation) (Orchestration, error)
	GetOrchestration(ctx context.Context, id string) (Orchestration, error)
	ListOrchestrations(ctx context.Context, f OrchestrationFilter) (Page[Orchestration], error)
	// SetOrchestrationState moves the orchestration to state if it is in one of from
	// (ErrConflict otherwise: someone moved it first).
	SetOrchestrationState(ctx context.Context, id string, from []string, state, description string) error
	// CountOrchestrationOperations counts the orchestration's operations per shown state.
	CountOrchestrationOperations(ctx context.Context, id string) (map[string]int, error)
	ListOrchestrationOperations(ctx context.Context, id string, f OrchestrationOperationFilter) (Page[OrchestrationOperation], error)
	// GetOrchestrationOperation finds the operation of the orchestration with that operation ID.
	GetOrchestrationOperation(ctx context.Context, id, operationID string) (OrchestrationOperation, error)
	// DueOrchestrationOperations lists up to limit operations not started (pending, retrying)
	// whose DueAt is not after now, earliest first.
	DueOrchestrationOperations(ctx context.Context, id string, now time.Time, limit int) ([]OrchestrationOperation, error)
	// StartOrchestrationOperation inserts op (its ID must be the row's OperationID) for the row
	// of (id, op.InstanceID) and marks the row started, in one transaction, when: the row is
	// still pending or retrying with that operation ID (else ErrConflict); fewer than workers of
	// the orchestration's operations are active (else ErrWorkersBusy); the instance exists (else
	// ErrNotFound) and has no active operation of a blocking type (else *InProgressError). A
	// pending orchestration becomes in progress in the same transaction. An instance deprovisioned
	// or with a deprovisioning pending, running or succeeded (checked under the instance row's lock
	// that accepting a deprovisioning takes too) is not upgraded: the row becomes skipped and the
	// answer is a *SkippedError.
	StartOrchestrationOperation(ctx context.Context, id string, op Operation, workers int, blocking []string) (Operation, error)
	// DeferOrchestrationOperation moves a row not yet started (still with operationID) to dueAt
	// with why in its description; failed=true ends it as failed instead (e.g. the instance is gone).
	DeferOrchestrationOperation(ctx context.Context, id, instanceID, operationID string, dueAt time.Time, description string, failed bool) error
	// CancelOrchestration moves a pending, in progress or retrying orchestration to canceling and
	// its not started operations to canceled, in one transaction; with nothing running it is
	// canceled at once. Canceling or canceled: nothing changes. Finished: ErrOrchestrationState.
	CancelOrchestration(ctx context.Context, id string) (CancelResult, error)
	// RetryOrchestration queues the failed operations again (skipped ones never) (only those listed, when any are; a
	// listed one that is not a failed operation of the orchestration is an *InvalidRetryError),
	// each with a new operation ID from newID, due now, and moves the orchestration to retrying.
	// It returns the new operation IDs.
	RetryOrchestration(ctx context.Context, id string, operationIDs []string, newID func() string, now time.Time) ([]string, error)
}

// InvalidRetryError names operations that cannot be retried.
type InvalidRetryError struct {
	OperationIDs []string
	Reason       string
}

func (e *InvalidRetryError) Error() string {
	return e.Reason
}

// SingletonLock is held by one process at a time across replicas (PostgreSQL: a session advisory
// lock on a dedicated connection, so a killed holder's lock ends with its connection).
type SingletonLock interface {
	// Lost is closed when the lock is no longer held (its connection broke).
	Lost() <-chan struct{}
	// Release gives the lock up.
	Release()
}
