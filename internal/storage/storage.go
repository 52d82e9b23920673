// Package storage defines what KEB keeps in its database: instances, operations (with the step
// engine's scheduling and progress columns) and events. Drivers live in driver/postgres and
// driver/sqlite; both pass the conformance suite in storagetest.
package storage

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/jmoiron/sqlx"
	"slices"
	"time"
)

var (
	// ErrNotFound is returned when a row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists is returned when inserting a row whose ID is taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict is returned when a write carries a stale version (optimistic locking) or a
	// lease that is no longer held. The caller must re-read; the write was not applied.
	ErrConflict = errors.New("conflict: stale version or lost lease")
	// ErrTooManyValues is returned, without querying, for filter lists with more values together
	// than MaxListValues: each value is a bind variable and the drivers take a bounded number.
	ErrTooManyValues = errors.New("too many filter values")
)

// MaxListValues bounds the values of a query's filter lists together: SQLite binds at most
// 32766 variables in a statement (PostgreSQL 65535), and the statement has others.
const MaxListValues = 30_000

// OperationState values follow the OSB last_operation states, plus pending.
type OperationState string

const (
	StatePending    OperationState = "pending"
	StateInProgress OperationState = "in progress"
	StateSucceeded  OperationState = "succeeded"
	StateFailed     OperationState = "failed"
)

// Active reports whether an operation in this state still has work to do.
func (s OperationState) Active() bool { return s == StatePending || s == StateInProgress }

// Secrets are values encrypted at rest (kubeconfigs, client secrets, service manager
// credentials). Drivers encrypt them on write and decrypt them on read.
type Secrets map[string]string

// Operation types of the broker (Operation.Type).
const (
	TypeProvision   = "provision"
	TypeDeprovision = "deprovision"
	TypeUpdate      = "update"
	// TypeSuspension removes a trial's runtime but keeps the instance; a later provisioning of
	// the same instance resumes it.
	TypeSuspension = "suspension"
	// TypeUpgradeKyma and TypeUpgradeCluster are operator-triggered upgrades of a runtime.
	TypeUpgradeKyma    = "upgradeKyma"
	TypeUpgradeCluster = "upgradeCluster"
)

// OperationTypes are every operation type of the broker: an instance runs one of them at a time.
func OperationTypes() []string {
	return []string{TypeProvision, TypeDeprovision, TypeUpdate, TypeSuspension, TypeUpgradeKyma, TypeUpgradeCluster}
}

// Operation is one durable process run. The typed columns are what the engine schedules on;
// Data is the process-specific payload (JSON).
type Operation struct {
	ID          string
	InstanceID  string
	Type        string
	State       OperationState
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Version increases with every write; a write with a stale version is ErrConflict.
	Version int64

	// DueAt is when the operation should next run; nil once it has finished. While a worker
	// holds the operation it equals the lease expiry: when it is due again if that worker dies.
	DueAt *time.Time
	// LeaseOwner/LeaseExpiresAt: the worker that holds the operation and until when.
	LeaseOwner     string
	LeaseExpiresAt *time.Time
	// Deadline: an active operation still running after it is failed (by its worker or the sweeper).
	Deadline time.Time

	Stage     string
	Progress  Progress
	LastError string

	Data    json.RawMessage
	Secrets Secrets
}

// Save is what a SaveProgress writes besides the operation and its events.
type Save struct {
	// Kept names payload columns the caller has not changed since it read or last wrote the
	// row at the operation's Version: the save leaves them as the row holds them instead of
	// writing a copy (PostgreSQL writes a large value whole, TOAST included, on every write
	// that sets it, even to the same bytes). A bit set for a value that did change loses that
	// change.
	Kept Kept
	// Instance sets these fields of the operation's instance in the save's transaction, if the
	// save is written: fields a step sets ride on its operation's next write instead of a
	// statement of their own (engine.DeferInstanceFields).
	Instance *InstanceFields
	// Runtime is Instance for the provisioner's runtime the operation is of (its InstanceID).
	Runtime *RuntimeFields
}

// RuntimeFields are the provisioner's runtime's columns a step sets alone; nil leaves one as it is.
type RuntimeFields struct {
	CompassRuntimeID *string
	// Kubeconfig is the runtime's Secrets[KubeconfigSecret], encrypted in a column of its own: a
	// step stores it without reading and re-encrypting the runtime's other secrets.
	Kubeconfig *string
}

// Merge returns f with the fields other sets as other sets them (a new value; f is not changed).
func (f *RuntimeFields) Merge(other RuntimeFields) *RuntimeFields {
	var out RuntimeFields
	if f != nil {
		out = *f
	}
	overlay(map[**string]*string{&out.CompassRuntimeID: other.CompassRuntimeID, &out.Kubeconfig: other.Kubeconfig})
	return &out
}

// overlay sets each field to its value where one is given (not nil).
func overlay(fields map[**string]*string) {
	for dst, v := range fields {
		if v != nil {
			*dst = v
		}
	}
}

// KubeconfigSecret is the runtime's secret holding its cluster's kubeconfig. The stores keep it
// apart from the runtime's other secrets (RuntimeFields.Kubeconfig); Runtime.Secrets has it as
// any other.
const KubeconfigSecret = "kubeconfig"

// Kept is a set of an operation's payload columns (Data, Secrets).
type Kept uint8

const (
	KeepData Kept = 1 << iota
	KeepSecrets
)

// Progress is everything the engine needs to continue an operation after a restart.
type Progress struct {
	FinishedStages []string `json:"finished_stages,omitempty"`
	// StageStartedAt: when each stage first started; per-stage time limits are measured from it
	// (plus the Late of the stage's steps).
	StageStartedAt map[string]time.Time `json:"stage_started_at,omitempty"`
	// Steps: per step name, attempts and completion.
	Steps map[string]StepProgress `json:"steps,omitempty"`
	// ExecutedButNotCompleted: steps that gave up with RetryOperationWithoutFail.
	ExecutedButNotCompleted []string `json:"executed_but_not_completed,omitempty"`
}

// StepProgress records one step's history within an operation.
type StepProgress struct {
	FirstAttempt time.Time `json:"first_attempt"`
	// LastHealthy is the last run that asked to wait without reporting a failure (a poll that
	// found the work still going): a later failure's retry window starts there, not at the
	// first attempt, so a long wait does not use up the window.
	LastHealthy time.Time `json:"last_healthy,omitzero"`
	Attempts    int       `json:"attempts"`
	Done        bool      `json:"done,omitempty"`
	Skipped     bool      `json:"skipped,omitempty"`
	// RetryUntil is the end of the step's current retry window, recorded when a retry helper
	// first reports a failure after the window's start: it caps the next run's due time and
	// the run's context, and survives restarts. A healthy wait clears it (a new window).
	RetryUntil *time.Time `json:"retry_until,omitempty"`
	// RetryWithoutFail: the window was opened by RetryOperationWithoutFail, so its end records
	// the step as executed but not completed instead of failing the operation.
	RetryWithoutFail bool `json:"retry_without_fail,omitempty"`
	// LastError is the step's own last failure (it names the system and its answer), kept
	// after later steps overwrite the operation's last error: a limit's verdict and the
	// description of a step left not completed name it.
	LastError string `json:"last_error,omitempty"`
	// LastWait is what the step's last wait said it waited for: a wait that says the same again
	// writes no event (identical polls are not events), and the rule survives restarts.
	LastWait string `json:"last_wait,omitempty"`
	// SlowWarned: the step's failing retries outlasted the engine's SlowRetryWarning and this
	// was logged (once per step).
	SlowWarned bool `json:"slow_warned,omitempty"`
	// Due is when the step's current wait ends; the run after the wait takes it to measure how
	// late that run started, and clears it.
	Due time.Time `json:"due,omitzero"`
	// Late is how long the step's runs started after they were due (waiting for a worker, in a
	// backlog of due operations, or while no broker ran): the engine's delay, not the step's, so
	// the step's and its stage's time limits are moved by it. Delays under a second are normal
	// dispatch and not counted.
	Late time.Duration `json:"late,omitempty"`
	// GivesUpAt is, as of the step's last retry, the first of its limits (operation deadline,
	// stage and step limits, end of its retry window): when it stops being retried. Events
	// report it (gives_up_at).
	GivesUpAt time.Time `json:"gives_up_at,omitzero"`
}

// CurrentStep is the step an unfinished operation was last running: of the steps started and
// not done, the one with the latest first attempt ("" when none was started).
func (p Progress) CurrentStep() (string, StepProgress) {
	var name string
	var current StepProgress
	for n, sp := range p.Steps {
		if sp.Done || sp.FirstAttempt.IsZero() {
			continue
		}
		if name == "" || sp.FirstAttempt.After(current.FirstAttempt) || (sp.FirstAttempt.Equal(current.FirstAttempt) && n < name) {
			name, current = n, sp
		}
	}
	return name, current
}

// LimitVerdict is how an operation ended by a limit is described: the step it was in, the
// limit, and the step's last error (which names the system and its answer).
func LimitVerdict(step, limit, lastError string) string {
	msg := limit
	if step != "" {
		msg = "step " + step + ": " + limit
	}
	if lastError != "" {
		msg += "; last error: " + lastError
	}
	return msg
}

// StageFinished reports whether the stage is recorded as finished.
func (p Progress) StageFinished(stage string) bool { return slices.Contains(p.FinishedStages, stage) }

// EventType is what happened to a step.
type EventType string

const (
	EventStarted   EventType = "started"
	EventRetrying  EventType = "retrying"
	EventSucceeded EventType = "succeeded"
	EventFailed    EventType = "failed"
	EventSkipped   EventType = "skipped"
)

// Event is one step start, retry, success, failure or skip. Duration is the step's run time
// (for retrying: the wait until the next attempt is in Message and Wait).
type Event struct {
	ID          int64
	OperationID string
	InstanceID  string
	Step        string
	// Stage is the stage the step belongs to ("" for events written before stages were recorded).
	Stage     string
	Type      EventType
	Message   string
	Duration  time.Duration
	Wait      time.Duration
	CreatedAt time.Time
}

// Instance is a provisioned (or being provisioned) runtime as the broker knows it.
type Instance struct {
	InstanceID      string
	RuntimeID       string
	GlobalAccountID string
	SubAccountID    string
	ServiceID       string
	PlanID          string
	ProviderRegion  string
	DashboardURL    string
	Parameters      json.RawMessage
	Secrets         Secrets
	// DeletedAt is set when the instance was deprovisioned: it is archived, not forgotten,
	// so last_operation keeps answering.
	DeletedAt *time.Time
	// ExpiredAt is set when a trial or free instance expired (its runtime is removed, the
	// instance stays). Only Lifecycle.ExpireWithOperation writes it.
	ExpiredAt *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// Paging: Page starts at 1; PageSize 0 means the driver default (100); at most 1000.
type Paging struct {
	Page     int
	PageSize int
	// WithoutTotal is for callers that want only the items (the newest operation of an instance):
	// the page's TotalCount is then UnknownTotal unless the page itself tells it, which saves a COUNT.
	WithoutTotal bool
}

// UnknownTotal is a page's TotalCount when it was not counted (Paging.WithoutTotal).
const UnknownTotal = -1

// InstanceFilter: empty slices do not filter. Results are ordered by creation, oldest first.
type InstanceFilter struct {
	InstanceIDs      []string
	RuntimeIDs       []string
	GlobalAccountIDs []string
	SubAccountIDs    []string
	PlanIDs          []string
	Regions          []string
	IncludeDeleted   bool
	Paging
}

// OperationFilter: empty slices do not filter. Results are ordered newest first.
type OperationFilter struct {
	IDs         []string
	InstanceIDs []string
	Types       []string
	States      []OperationState
	Paging
}

// EventFilter: empty slices and zero IDs do not filter. Results are ordered by ID (insertion
// order), newest first when Descending.
type EventFilter struct {
	// InstanceIDs keeps the events of these instances' operations (an event's instance is its
	// operation's).
	InstanceIDs  []string
	OperationIDs []string
	Types        []EventType
	Stages       []string
	// AfterID and BeforeID keep events with an ID above / below them (cursor paging).
	AfterID, BeforeID int64
	Descending        bool
	Paging
}

// Page is one page of a listing and the number of rows matching the filter.
type Page[T any] struct {
	Items      []T
	TotalCount int
}

// ClaimRequest asks for due operations: active, DueAt <= Now, and no lease or an expired one.
type ClaimRequest struct {
	Owner      string
	Types      []string
	Now        time.Time
	LeaseUntil time.Time
	Limit      int
	// CreatedAfter, when set, claims only operations created at or after it.
	CreatedAfter time.Time
	// Own claims only the active operations Owner leases, due or not, expired or not: a
	// restarted engine with a stable owner takes back what its previous life held, in one
	// statement, before any other replica can (nothing of them runs in this process yet).
	Own bool
}

// OperationCount is the number of operations of one type in one state.
type OperationCount struct {
	Type  string
	State OperationState
	Count int
}

// OperationStatus is the part of an operation that last_operation reports.
type OperationStatus struct {
	ID, InstanceID, Type string
	State                OperationState
	Description          string
	LastError            string
}

// LastOperationRead is what ReadLastOperation found; Named and Newest are nil when not found.
type LastOperationRead struct {
	InstanceExists bool
	Named, Newest  *OperationStatus
}

type Instances interface {
	InsertInstance(ctx context.Context, inst Instance) (Instance, error)
	// InsertInstanceWithOperation stores a new instance and its first operation in one
	// transaction (ErrAlreadyExists if the instance exists: then nothing is written) and
	// wakes the engine.
	InsertInstanceWithOperation(ctx context.Context, inst Instance, op Operation) (Instance, Operation, error)
	// InsertUniqueInstanceWithOperation is InsertInstanceWithOperation for plans limited to one
	// live instance per global account (trial): under a lock on (global account, plan) it
	// refuses with a *QuotaError when another such instance exists (ErrAlreadyExists when it is
	// inst itself, as InsertInstanceWithOperation). Safe across replicas.
	InsertUniqueInstanceWithOperation(ctx context.Context, inst Instance, op Operation) (Instance, Operation, error)
	// InsertOperationExclusive inserts op for the instance op.InstanceID unless the instance
	// has an active operation of one of the blocking types; then it returns an
	// *InProgressError carrying that operation. Check and insert are atomic across replicas.
	InsertOperationExclusive(ctx context.Context, op Operation, blocking []string) (Operation, error)
	GetInstance(ctx context.Context, id string) (Instance, error)
	// UpdateInstance writes inst if inst.Version is current and returns it with the new version.
	UpdateInstance(ctx context.Context, inst Instance) (Instance, error)
	// SetInstanceFields writes the fields f sets in one statement, without reading the instance
	// and whatever its version; nothing is written when they already have these values.
	// Otherwise the version goes up as with UpdateInstance, so a writer of the old version
	// conflicts and re-reads. ErrNotFound when there is no such instance.
	SetInstanceFields(ctx context.Context, id string, f InstanceFields) error
	DeleteInstance(ctx context.Context, id string) error
	ListInstances(ctx context.Context, f InstanceFilter) (Page[Instance], error)
}

// InstanceFields are the instance's columns a step sets alone; nil leaves one as it is.
type InstanceFields struct {
	RuntimeID    *string
	DashboardURL *string
	// ShootName is the runtime's cluster name (RuntimeQuery.ShootNames). A provisioning's saved
	// data sets it too; set here beside another field, it spares that its own row write.
	ShootName *string
}

// Merge returns f with the fields other sets as other sets them (a new value; f is not changed).
func (f *InstanceFields) Merge(other InstanceFields) *InstanceFields {
	var out InstanceFields
	if f != nil {
		out = *f
	}
	overlay(map[**string]*string{&out.RuntimeID: other.RuntimeID, &out.DashboardURL: other.DashboardURL, &out.ShootName: other.ShootName})
	return &out
}

type Operations interface {
	// InsertOperation stores a new operation (Version 1) and wakes the engine's workers.
	InsertOperation(ctx context.Context, op Operation) (Operation, error)
	GetOperation(ctx context.Context, id string) (Operation, error)
	// UpdateOperation writes op if op.Version is current, whoever holds the lease.
	UpdateOperation(ctx context.Context, op Operation) (Operation, error)
	ListOperations(ctx context.Context, f OperationFilter) (Page[Operation], error)

	// ClaimOperations leases up to Limit due operations to Owner until LeaseUntil (which becomes
	// their DueAt), earliest DueAt first, and returns them with their new Version. Two
	// concurrent claims never return the same operation.
	ClaimOperations(ctx context.Context, r ClaimRequest) ([]Operation, error)
	// SaveProgress writes op and appends events in one transaction, only if op.Version is current
	// and op.LeaseOwner still holds the lease (else ErrConflict). Clearing LeaseOwner releases it.
	// The events are op's own: they are written with op's operation and instance IDs. with is
	// written in the same transaction (Save).
	SaveProgress(ctx context.Context, op Operation, with Save, events []Event) (Operation, error)
	// ExtendLeases moves the lease expiry (and DueAt) of the owner's active operations; returns
	// the IDs still held. It does not change Version.
	ExtendLeases(ctx context.Context, owner string, ids []string, until time.Time) ([]string, error)
	// ReleaseLeases drops the owner's leases on active operations in ids and makes them due at
	// dueAt, without changing anything else (nor Version).
	ReleaseLeases(ctx context.Context, owner string, ids []string, dueAt time.Time) error
	// ReclaimLeases releases every lease the owner holds on active operations but keep's and makes them
	// due at dueAt, without changing anything else (nor Version); it returns their IDs. A
	// restarted engine with a stable owner calls it after claiming back what its workers take
	// (ClaimRequest.Own): the rest of what its previous life held moves again at once instead
	// of after the lease expiry. It wakes no worker (a wake-up let one live replica claim it
	// all, its own bounds queueing it); other replicas find it due at their next poll.
	ReclaimLeases(ctx context.Context, owner string, dueAt time.Time, keep []string) ([]string, error)
	// NextDueAt is the earliest DueAt among active operations of the types (nil if none).
	NextDueAt(ctx context.Context, types []string) (*time.Time, error)
	// FailOverdue fails active operations whose Deadline is before now and whose lease is free or
	// expired, records a failed event for each, and returns them. Each one's description names
	// the step it was in and that step's last error (LimitVerdict with message as the limit).
	FailOverdue(ctx context.Context, now time.Time, message string) ([]Operation, error)
	// ReadLastOperation is last_operation's read, without decoding payloads or decrypting secrets:
	// whether the instance exists, the operation named operationID (whoever's instance it is; ""
	// names none) and, only when none is named or the named one is unknown, the instance's newest
	// operation of the types. A named operation that exists costs one round trip.
	ReadLastOperation(ctx context.Context, instanceID, operationID string, types []string) (LastOperationRead, error)
	CountOperations(ctx context.Context) ([]OperationCount, error)
	// QueueDepth is the number of active operations due at now and not leased.
	QueueDepth(ctx context.Context, now time.Time) (int, error)
	// OldestDue is the due time of the one among them that has waited longest; ok is false when
	// there is none (the due lag is now minus it).
	OldestDue(ctx context.Context, now time.Time) (due time.Time, ok bool, err error)
	// Wake makes the active operations r selects due at r.Now when they are not leased and
	// due later (what waits for something that has just happened runs at once instead of at
	// its next poll), without changing anything else (nor Version), and wakes the engines of
	// every replica. It returns the IDs it made due, in order.
	Wake(ctx context.Context, r WakeRequest) ([]string, error)
}

// WakeRequest selects operations for Operations.Wake: those named in IDs, of the instances in
// InstanceIDs, or of the instances whose runtime is in RuntimeIDs (a provisioner's operation
// knows the runtime, the broker's operations the instance); Types, when set, narrows them.
// At least one of IDs, InstanceIDs and RuntimeIDs must be set.
type WakeRequest struct {
	IDs         []string
	InstanceIDs []string
	RuntimeIDs  []string
	Types       []string
	Now         time.Time
}

type Events interface {
	InsertEvents(ctx context.Context, events ...Event) error
	ListEvents(ctx context.Context, f EventFilter) (Page[Event], error)
}

// Database is a store's database as a component that keeps tables of its own in it (with a
// migration line of its own) sees it: the store's connections, shared, so that its writes queue
// with the store's (SQLite has one writer) instead of competing with them.
type Database struct {
	// Driver is "postgres" or "sqlite".
	Driver string
	// Writer runs writes (SQLite: the single writer connection).
	Writer *sqlx.DB
	// Unflushed runs writes whose commit need not wait for a WAL flush (PostgreSQL's unflushed
	// sessions); Writer where there are none.
	Unflushed *sqlx.DB
}

// Store is one database with all of KEB's tables.
type Store interface {
	Instances() Instances
	Operations() Operations
	Events() Events
	Runtimes() Runtimes
	StaticAllocations() StaticAllocations
	Bindings() Bindings
	// Database is the store's database for a component that keeps tables of its own in it.
	Database() Database
	Lifecycle() Lifecycle
	Orchestrations() Orchestrations
	// TryLock takes the process-wide singleton lock name if no one holds it (ok false
	// otherwise); see SingletonLock.
	TryLock(ctx context.Context, name string) (lock SingletonLock, ok bool, err error)
	// Wakeups delivers a signal whenever operations may have become due (new, released), in this
	// process and, for PostgreSQL, in every replica. The channel closes when ctx ends.
	Wakeups(ctx context.Context) (<-chan struct{}, error)
	// Takes makes t a taker of new operations until ctx ends: an operation inserted due at once
	// with its instance or runtime (InsertInstanceWithOperation and the like) is inserted
	// leased to a taker that keeps a worker for it, and handed to that worker after the commit,
	// instead of being claimed.
	Takes(ctx context.Context, t Taker)
	// SchemaVersion is the highest applied migration.
	SchemaVersion(ctx context.Context) (int, error)
	// RotateSecrets re-encrypts every secret not under the primary key; returns how many rows.
	RotateSecrets(ctx context.Context) (int, error)
	Ping(ctx context.Context) error
	// ProbeWrite writes a page-sized row and rolls it back: it fails (IsFull) when the database
	// cannot grow, which Ping and reads do not notice.
	ProbeWrite(ctx context.Context) error
	Close() error
}

// Taker runs operations in this process: an engine (Store.Takes).
type Taker interface {
	// Reserve keeps a worker for a new operation of opType when one is free now.
	Reserve(opType string) (Reservation, bool)
}

// Reservation is a worker kept for a new operation. The operation is inserted leased to Owner
// until LeaseUntil and then handed over with Take; Cancel gives the worker back when the insert
// failed. A process that dies in between leaves a lease that expires (or that its engine's
// restart reclaims), like a claim's.
type Reservation struct {
	Owner      string
	LeaseUntil time.Time
	Take       func(Operation)
	Cancel     func()
}
