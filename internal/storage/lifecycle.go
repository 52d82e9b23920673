package storage

import (
	"context"
	"time"
)

// Runtime states as GET /runtimes reports and filters them. They are derived in the database
// from the instance's row: its archive time, expiry and newest operation (kept on the row by
// triggers), so filters and paging never read every instance.
const (
	RuntimeProvisioning   = "provisioning"
	RuntimeProvisioned    = "provisioned"
	RuntimeFailed         = "failed"
	RuntimeUpdating       = "updating"
	RuntimeUpgrading      = "upgrading"
	RuntimeDeprovisioning = "deprovisioning"
	RuntimeDeprovisioned  = "deprovisioned"
	RuntimeSuspended      = "suspended"
)

// RuntimeStates are every state a runtime can be in, in the order the API documents them.
func RuntimeStates() []string {
	return []string{RuntimeProvisioning, RuntimeProvisioned, RuntimeFailed, RuntimeUpdating, RuntimeUpgrading,
		RuntimeDeprovisioning, RuntimeDeprovisioned, RuntimeSuspended}
}

// RuntimeRow is an instance with its derived state (GET /runtimes).
type RuntimeRow struct {
	Instance
	State string
	// LastOperationType and LastOperationState are the instance's newest operation's; a pending
	// operation's state is in progress here (both are active; the instance is not rewritten when
	// the first step starts).
	LastOperationType  string
	LastOperationState OperationState
}

// Runtime sort keys (RuntimeQuery.Sort); every sort breaks ties by instance ID in the same
// direction, so pages are stable.
const (
	SortCreatedAt       = "created_at"
	SortInstanceID      = "instance_id"
	SortRuntimeID       = "runtime_id"
	SortGlobalAccountID = "global_account_id"
	SortSubAccountID    = "subaccount_id"
	SortPlan            = "plan"
	SortRegion          = "region"
	SortState           = "state"
)

// RuntimeSorts are the keys RuntimeQuery.Sort accepts, in the order the API documents them.
func RuntimeSorts() []string {
	return []string{SortCreatedAt, SortInstanceID, SortRuntimeID, SortGlobalAccountID, SortSubAccountID, SortPlan, SortRegion, SortState}
}

// RuntimeQuery selects runtimes (instances); empty slices do not filter. Deprovisioned (archived)
// instances are included only when States asks for them or IncludeDeleted is set. Results
// are ordered by Sort ("" is SortCreatedAt; SortPlan orders by plan ID), ascending unless
// Descending, ties broken by instance ID.
type RuntimeQuery struct {
	Sort       string
	Descending bool
	// InstanceFilter's IncludeDeleted lists archived instances whatever States says.
	InstanceFilter
	// ShootNames match the runtime's cluster (the shoot name its provisioning recorded).
	ShootNames []string
	States     []string
	// Expired: nil does not filter; true only expired instances, false only the others.
	Expired *bool
	// CreatedBefore, when set, keeps only instances of those plans created before the plan's
	// time (what expires within a window: created before now + window - the plan's lifetime).
	CreatedBefore map[string]time.Time
}

// RuntimeCount is how many runtimes share a plan, a region and a state.
type RuntimeCount struct {
	PlanID string
	Region string
	State  string
	Count  int
}

// Retrigger states.
const (
	RetriggerRetrying  = "retrying"
	RetriggerCompleted = "completed"
	RetriggerOrphaned  = "orphaned"
)

// Retrigger is a deprovisioning (or suspension) that left steps executed but not completed,
// and what the re-trigger job did about them.
type Retrigger struct {
	// OriginID is the operation that left the steps; OriginType its type.
	OriginID   string
	InstanceID string
	OriginType string
	// Steps are those still not completed.
	Steps           []string
	State           string
	Attempts        int
	LastOperationID string
	// LastError is why the steps were not completed (each step's last error).
	LastError string
	NextAt    time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Lifecycle is what the operator API and the lifecycle jobs need beyond the instances and
// operations interfaces.
type Lifecycle interface {
	// FindRuntimes filters and pages in the database.
	FindRuntimes(ctx context.Context, f RuntimeQuery) (Page[RuntimeRow], error)
	// CountRuntimes counts live (not archived) runtimes per plan, region and state.
	CountRuntimes(ctx context.Context) ([]RuntimeCount, error)
	// ExpireWithOperation sets the instance's expired_at to at and inserts op (its suspension)
	// in one transaction, unless the instance has an active operation of a blocking type
	// (*InProgressError) or is archived (ErrNotFound). An instance already expired keeps its
	// expiry time: then only op is inserted (a repeat after a failed suspension). With an empty
	// op.ID (the runtime is removed already) only the expiry is written, under the same checks.
	ExpireWithOperation(ctx context.Context, op Operation, at time.Time, blocking []string) (Operation, error)

	// NotCompletedOperations are succeeded operations of the types, updated at or after since,
	// that recorded steps executed but not completed and are neither known to the re-trigger
	// job nor created by it; oldest first, at most limit.
	NotCompletedOperations(ctx context.Context, types []string, since time.Time, limit int) ([]Operation, error)
	// InsertRetrigger records a new origin (ErrAlreadyExists if it is known).
	InsertRetrigger(ctx context.Context, r Retrigger) error
	// UpdateRetrigger writes r's state, steps, attempts, last operation, error and next time.
	UpdateRetrigger(ctx context.Context, r Retrigger) error
	// InsertRetriggerOperation inserts op exclusively (as InsertOperationExclusive), records it
	// as created by the job and writes r, in one transaction.
	InsertRetriggerOperation(ctx context.Context, r Retrigger, op Operation, blocking []string) (Operation, error)
	// ListRetriggers lists by state (all when empty), due ones first when dueBefore is set.
	ListRetriggers(ctx context.Context, states []string, dueBefore *time.Time, p Paging) (Page[Retrigger], error)
}
