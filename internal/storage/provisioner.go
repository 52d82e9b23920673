package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrOperationInProgress: the runtime already has an active operation.
var ErrOperationInProgress = errors.New("another operation is in progress for this runtime")

// InProgressError: an operation blocks the one that was to be inserted.
type InProgressError struct{ Operation Operation }

func (e *InProgressError) Error() string {
	return fmt.Sprintf("%s operation %s is in progress", e.Operation.Type, e.Operation.ID)
}

func (e *InProgressError) Is(target error) bool { return target == ErrOperationInProgress }

// QuotaError: the global account already has its one instance of the plan.
type QuotaError struct{ InstanceID string }

func (e *QuotaError) Error() string {
	return fmt.Sprintf("the global account already has instance %s of this plan", e.InstanceID)
}

// ErrNoCapacity: a static pool has no host with enough free slots.
var ErrNoCapacity = errors.New("no host with enough free slots")

// Runtime is a runtime as the embedded provisioner knows it.
type Runtime struct {
	ID               string
	Tenant           string
	Name             string
	Backend          string
	CompassRuntimeID string
	// Config is the requested configuration (cluster and Kyma) as JSON; secret Kyma
	// configuration values live in Secrets.
	Config json.RawMessage
	// Allocation is where the runtime runs and what it was given, as its backend reported it
	// (JSON of infrastructure.Allocation); empty until known or for backends that do not
	// allocate.
	Allocation json.RawMessage
	// Secrets (kubeconfig, secret configuration entries) are encrypted at rest.
	Secrets   Secrets
	Deleted   bool
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// RuntimeFilter: empty slices do not filter; ordered by creation, oldest first.
type RuntimeFilter struct {
	IDs            []string
	Tenants        []string
	IncludeDeleted bool
	Paging
}

type Runtimes interface {
	// InsertRuntimeWithOperation stores a new runtime and its first operation (whose
	// InstanceID is the runtime ID) in one transaction, and wakes the engine.
	InsertRuntimeWithOperation(ctx context.Context, rt Runtime, op Operation) (Runtime, Operation, error)
	GetRuntime(ctx context.Context, id string) (Runtime, error)
	// UpdateRuntime writes rt if rt.Version is current (ErrConflict otherwise).
	UpdateRuntime(ctx context.Context, rt Runtime) (Runtime, error)
	// SetRuntimeFields writes the fields f sets as Instances.SetInstanceFields writes an
	// instance's: one statement, no read, nothing written when they already have these values
	// (a kubeconfig, encrypted anew, differs each time). ErrNotFound when there is no such runtime.
	SetRuntimeFields(ctx context.Context, id string, f RuntimeFields) error
	ListRuntimes(ctx context.Context, f RuntimeFilter) (Page[Runtime], error)
	// StartRuntimeOperation inserts op for the runtime op.InstanceID unless that runtime has an
	// active operation (ErrOperationInProgress) or does not exist (ErrNotFound); the check and
	// the insert are atomic, so two concurrent calls never both succeed.
	StartRuntimeOperation(ctx context.Context, op Operation) (Operation, error)
	// ReadRuntimeOperationStatus reads what the provisioner's status API reports of an operation
	// and its runtime (ErrNotFound when there is no such operation), without the operation's
	// progress and secrets or the runtime's configuration and secrets: the broker's waits poll it.
	ReadRuntimeOperationStatus(ctx context.Context, operationID string) (RuntimeOperationStatus, error)
}

// RuntimeOperationStatus is an operation's status and stage, whether its data configures Kyma,
// and its runtime's tenant, Compass ID and deletion (RuntimeFound false when the operation's
// instance is no runtime).
type RuntimeOperationStatus struct {
	OperationStatus
	Stage string
	// Kyma: the operation's data has a Kyma configuration (data.config.kyma is set and not null).
	Kyma             bool
	RuntimeFound     bool
	Tenant           string
	CompassRuntimeID string
	Deleted          bool
}

// StaticHost is one host of a static pool and its capacity in slots.
type StaticHost struct {
	Host  string
	Slots int
}

// StaticAllocation is slots of one host given to one runtime.
type StaticAllocation struct {
	Pool      string
	RuntimeID string
	Host      string
	Slots     int
	CreatedAt time.Time
}

type StaticAllocations interface {
	// AllocateSlots gives runtimeID slots on a host of pool with free capacity, under a
	// database lock so concurrent allocations can never oversubscribe a host. A runtime that
	// already has an allocation in the pool gets it back (idempotent). ErrNoCapacity when full.
	AllocateSlots(ctx context.Context, pool string, hosts []StaticHost, runtimeID string, slots int) (StaticAllocation, error)
	GetAllocation(ctx context.Context, pool, runtimeID string) (StaticAllocation, error)
	// ReleaseSlots frees the runtime's allocation; releasing a missing one is not an error.
	ReleaseSlots(ctx context.Context, pool, runtimeID string) error
	// UsedSlots is the number of allocated slots per host of the pool.
	UsedSlots(ctx context.Context, pool string) (map[string]int, error)
}
