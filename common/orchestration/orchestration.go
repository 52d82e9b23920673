// Package orchestration holds the operator API's public types for orchestrations (POST
// /upgrade/kyma|cluster, GET /orchestrations...), shared by the broker and its clients (kcp).
package orchestration

import "time"

// Orchestration states.
const (
	Pending    = "pending"
	InProgress = "in progress"
	Canceling  = "canceling"
	Canceled   = "canceled"
	Succeeded  = "succeeded"
	Failed     = "failed"
	Retrying   = "retrying"
	// Skipped is an operation's state only: its instance was deprovisioned (or its deprovisioning
	// accepted) before its turn, so it was never started. It is not a failure: an orchestration
	// whose operations all succeeded or were skipped succeeded.
	Skipped = "skipped"
)

// States lists every orchestration state (also the states of its operations, except canceling).
var States = []string{Pending, InProgress, Canceling, Canceled, Succeeded, Failed, Retrying}

// OperationStates lists every state of an orchestration's operation.
var OperationStates = []string{Pending, InProgress, Succeeded, Failed, Skipped, Canceled, Retrying}

// Types of orchestrations.
const (
	UpgradeKyma    = "upgradeKyma"
	UpgradeCluster = "upgradeCluster"
)

// TargetAll selects every runtime.
const TargetAll = "all"

// Target selects runtimes; every field given must match. Target "all" alone selects every runtime.
type Target struct {
	Target        string `json:"target,omitempty"`
	GlobalAccount string `json:"globalAccount,omitempty"`
	SubAccount    string `json:"subAccount,omitempty"`
	RuntimeID     string `json:"runtimeID,omitempty"`
	InstanceID    string `json:"instanceID,omitempty"`
	Region        string `json:"region,omitempty"`
	// PlanName: a plan name (e.g. azure, trial).
	PlanName string `json:"planName,omitempty"`
}

// TargetSpec: runtimes that an include target matches and no exclude target does.
type TargetSpec struct {
	Include []Target `json:"include"`
	Exclude []Target `json:"exclude,omitempty"`
}

// Schedules; any other value must be an RFC 3339 time.
const (
	ScheduleImmediate         = "immediate"
	ScheduleMaintenanceWindow = "maintenanceWindow"
)

// StrategyParallel is the only strategy type.
const StrategyParallel = "parallel"

// StrategySpec says how many runtimes are upgraded at once and when.
type StrategySpec struct {
	// Type: "parallel" (the default).
	Type string `json:"type,omitempty"`
	// Schedule: "immediate" (default), "maintenanceWindow" (each runtime in its next
	// maintenance window), or an RFC 3339 time.
	Schedule string       `json:"schedule,omitempty"`
	Parallel ParallelSpec `json:"parallel,omitempty"`
}

// ParallelSpec: at most Workers upgrades of the orchestration run at once (default 1).
type ParallelSpec struct {
	Workers int `json:"workers,omitempty"`
}

// KymaParameters of an upgradeKyma orchestration.
type KymaParameters struct {
	Version string `json:"version"`
}

// KubernetesParameters of an upgradeCluster orchestration.
type KubernetesParameters struct {
	KubernetesVersion   string `json:"kubernetesVersion,omitempty"`
	MachineImageVersion string `json:"machineImageVersion,omitempty"`
}

// Parameters is the body of POST /upgrade/kyma and /upgrade/cluster, kept with the orchestration.
type Parameters struct {
	Targets    TargetSpec            `json:"targets"`
	Strategy   StrategySpec          `json:"strategy,omitempty"`
	DryRun     bool                  `json:"dryRun,omitempty"`
	Kyma       *KymaParameters       `json:"kyma,omitempty"`
	Kubernetes *KubernetesParameters `json:"kubernetes,omitempty"`
}

// UpgradeResponse is the 202 answer to POST /upgrade/kyma|cluster.
type UpgradeResponse struct {
	OrchestrationID string `json:"orchestrationID"`
}

// StatusResponse is one orchestration (GET /orchestrations/{id}).
type StatusResponse struct {
	OrchestrationID string     `json:"orchestrationID"`
	Type            string     `json:"type"`
	State           string     `json:"state"`
	Description     string     `json:"description"`
	CreatedAt       time.Time  `json:"createdAt"`
	UpdatedAt       time.Time  `json:"updatedAt"`
	Parameters      Parameters `json:"parameters"`
	// OperationStats counts its operations per state (every operation state present, zeros
	// included; skipped counts those whose instance was deprovisioned before their turn).
	OperationStats map[string]int `json:"operationStats"`
}

// StatusResponseList is one page of GET /orchestrations.
type StatusResponseList struct {
	Data       []StatusResponse `json:"data"`
	Count      int              `json:"count"`
	TotalCount int              `json:"totalCount"`
}

// OperationResponse is one runtime's upgrade within an orchestration.
type OperationResponse struct {
	OperationID     string `json:"operationID"`
	OrchestrationID string `json:"orchestrationID"`
	Type            string `json:"type"`
	InstanceID      string `json:"instanceID"`
	RuntimeID       string `json:"runtimeID"`
	GlobalAccountID string `json:"globalAccountID"`
	SubAccountID    string `json:"subAccountID"`
	Region          string `json:"region"`
	ServicePlanID   string `json:"servicePlanID"`
	ServicePlanName string `json:"servicePlanName"`
	// State: pending, in progress, succeeded, failed, skipped, canceled, retrying.
	State string `json:"state"`
	// Description: for a skipped operation, why, with the deprovisioning's operation ID.
	Description string `json:"description"`
	DryRun      bool   `json:"dryRun,omitempty"`
	// Attempts: how many times the upgrade was started (retries start it again).
	Attempts int `json:"attempts"`
	// ScheduledAt: when the upgrade is (or was) due to start.
	ScheduledAt time.Time  `json:"scheduledAt"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
}

// OperationResponseList is one page of GET /orchestrations/{id}/operations.
type OperationResponseList struct {
	Data       []OperationResponse `json:"data"`
	Count      int                 `json:"count"`
	TotalCount int                 `json:"totalCount"`
}

// StepResponse is one step of an operation as the engine recorded it.
type StepResponse struct {
	Name         string    `json:"name"`
	Attempts     int       `json:"attempts"`
	Done         bool      `json:"done"`
	Skipped      bool      `json:"skipped,omitempty"`
	FirstAttempt time.Time `json:"firstAttempt"`
	LastError    string    `json:"lastError,omitempty"`
}

// EventResponse is one step event of an operation.
type EventResponse struct {
	Step       string    `json:"step"`
	Type       string    `json:"type"`
	Message    string    `json:"message"`
	DurationMS int64     `json:"durationMS"`
	CreatedAt  time.Time `json:"createdAt"`
}

// OperationDetailResponse is GET /orchestrations/{id}/operations/{opID}: the operation with
// its steps (empty until it started) and events.
type OperationDetailResponse struct {
	OperationResponse
	Stage          string          `json:"stage,omitempty"`
	FinishedStages []string        `json:"finishedStages,omitempty"`
	LastError      string          `json:"lastError,omitempty"`
	Steps          []StepResponse  `json:"steps"`
	Events         []EventResponse `json:"events"`
}

// RetryRequest is the optional body of PUT /orchestrations/{id}/retry: the operations to
// retry (each must be failed); empty retries every failed operation (never skipped ones).
type RetryRequest struct {
	OperationIDs []string `json:"operationIDs,omitempty"`
}

// RetryResponse answers PUT /orchestrations/{id}/retry.
type RetryResponse struct {
	OrchestrationID string `json:"orchestrationID"`
	// RetriedOperations: the operations queued again (their new operation IDs).
	RetriedOperations []string `json:"retriedOperations"`
	Message           string   `json:"message"`
}

// CancelResponse answers PUT /orchestrations/{id}/cancel.
type CancelResponse struct {
	OrchestrationID string `json:"orchestrationID"`
	State           string `json:"state"`
	// Canceled: how many pending operations were canceled (running ones finish).
	Canceled int `json:"canceled"`
}
