// Package runtime holds the operator API's public types (GET /runtimes, GET /events), shared
// by the broker and its clients (the kcp CLI).
package runtime

import (
	"encoding/json"
	"time"
)

// Operation is one operation of a runtime as operators see it.
type Operation struct {
	OperationID string    `json:"operationID"`
	Type        string    `json:"type"`
	State       string    `json:"state"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// Stage and the current step are set while the operation is pending or in progress: the
	// stage it is in, the step it last started (not done yet), that step's runs so far and
	// when its first run started.
	Stage               string     `json:"stage,omitempty"`
	CurrentStep         string     `json:"currentStep,omitempty"`
	CurrentStepAttempts int        `json:"currentStepAttempts,omitempty"`
	CurrentStepSince    *time.Time `json:"currentStepSince,omitempty"`
}

// Status is a runtime's state and its newest operation of each kind.
type Status struct {
	// State: provisioning, provisioned, failed, updating, upgrading, deprovisioning,
	// deprovisioned, suspended.
	State          string     `json:"state"`
	CreatedAt      time.Time  `json:"createdAt"`
	ModifiedAt     time.Time  `json:"modifiedAt"`
	DeletedAt      *time.Time `json:"deletedAt,omitempty"`
	Provisioning   *Operation `json:"provisioning,omitempty"`
	Deprovisioning *Operation `json:"deprovisioning,omitempty"`
	Update         *Operation `json:"update,omitempty"`
	// UpgradingKyma and UpgradingCluster are the newest upgrades (orchestrations run them);
	// Suspension the newest suspension (trial deactivation or expiry).
	UpgradingKyma    *Operation `json:"upgradingKyma,omitempty"`
	UpgradingCluster *Operation `json:"upgradingCluster,omitempty"`
	Suspension       *Operation `json:"suspension,omitempty"`
	// Operations are every operation of the runtime, newest first (op_detail=all only).
	Operations []Operation `json:"operations,omitempty"`
}

// DTO is one runtime (service instance) in GET /runtimes.
type DTO struct {
	InstanceID      string          `json:"instanceID"`
	RuntimeID       string          `json:"runtimeID"`
	GlobalAccountID string          `json:"globalAccountID"`
	SubAccountID    string          `json:"subAccountID"`
	ProviderRegion  string          `json:"region"`
	ServiceID       string          `json:"serviceID"`
	ServicePlanID   string          `json:"servicePlanID"`
	ServicePlanName string          `json:"servicePlanName"`
	DashboardURL    string          `json:"dashboardURL,omitempty"`
	Parameters      json.RawMessage `json:"parameters,omitempty"`
	Status          Status          `json:"status"`
	// ExpiredAt is when a trial or free instance expired; ExpiresAt when it will (plans
	// with expiry_days only, while not expired).
	ExpiredAt *time.Time `json:"expiredAt,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// KymaConfig and ClusterConfig are the provisioner's (kyma_config=true,
	// cluster_config=true); ConfigError says why they could not be read.
	KymaConfig    json.RawMessage `json:"kymaConfig,omitempty"`
	ClusterConfig json.RawMessage `json:"clusterConfig,omitempty"`
	ConfigError   string          `json:"configError,omitempty"`
	// RuntimeConnectionStatus is the Runtime Agent's connection as the provisioner reports it
	// (connection_status=true; ConfigError when it cannot be read).
	RuntimeConnectionStatus *ConnectionStatus `json:"runtimeConnectionStatus,omitempty"`
}

// ConnectionStatus is the provisioner's runtimeConnectionStatus of a runtime: Pending while the
// agent is being connected, Connected, or Disconnected (a failed connection, or the agent
// reporting FAILED in the Director: Errors say why and the remedy).
type ConnectionStatus struct {
	Status string   `json:"status"`
	Errors []string `json:"errors,omitempty"`
}

// Counts are GET /info/runtimes: live runtimes per plan (by name), region and state.
type Counts struct {
	Total   int            `json:"total"`
	Plans   map[string]int `json:"plans"`
	Regions map[string]int `json:"regions"`
	States  map[string]int `json:"states"`
	// Rows are the counts per plan, region and state together.
	Rows []CountRow `json:"rows"`
}

// CountRow is the number of runtimes of one plan in one region and state.
type CountRow struct {
	Plan   string `json:"plan"`
	Region string `json:"region"`
	State  string `json:"state"`
	Count  int    `json:"count"`
}

// Orphan is a deprovisioning whose steps were left executed but not completed, and what the
// re-trigger job did about them (GET /info/orphans).
type Orphan struct {
	OperationID     string    `json:"operationID"`
	InstanceID      string    `json:"instanceID"`
	Type            string    `json:"type"`
	Steps           []string  `json:"steps"`
	State           string    `json:"state"`
	Attempts        int       `json:"attempts"`
	LastOperationID string    `json:"lastOperationID,omitempty"`
	LastError       string    `json:"lastError,omitempty"`
	Since           time.Time `json:"since"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

// OrphanPage is one page of GET /info/orphans.
type OrphanPage struct {
	Data       []Orphan `json:"data"`
	Count      int      `json:"count"`
	TotalCount int      `json:"totalCount"`
}

// Expired is the answer of PUT /expire/service_instance/{id}.
type Expired struct {
	InstanceID string    `json:"instanceID"`
	ExpiredAt  time.Time `json:"expiredAt"`
	// OperationID is the suspension removing the runtime.
	OperationID string `json:"operationID,omitempty"`
	// AlreadyExpired: a repeat, nothing new was started.
	AlreadyExpired bool `json:"alreadyExpired,omitempty"`
}

// Page is one page of GET /runtimes.
type Page struct {
	Data       []DTO `json:"data"`
	Count      int   `json:"count"`
	TotalCount int   `json:"totalCount"`
}

// Event is one step event in GET /events.
type Event struct {
	// ID orders events (the feed's cursors after_id and before_id).
	ID          int64  `json:"id"`
	OperationID string `json:"operation_id"`
	InstanceID  string `json:"instance_id"`
	Step        string `json:"step"`
	// Stage is the stage of the step ("" for events recorded before stages were).
	Stage      string    `json:"stage"`
	Type       string    `json:"type"`
	Message    string    `json:"message"`
	DurationMS int64     `json:"duration_ms"`
	WaitMS     int64     `json:"wait_ms,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// RuntimeID is the runtime of the event's instance. A provisioner's operation belongs to
	// a runtime: its events name the instance that owns the runtime in InstanceID.
	RuntimeID string `json:"runtime_id,omitempty"`
	// Origin is "provisioner" for the provisioner's operations ("" for the broker's).
	Origin string `json:"origin,omitempty"`
	// NextTryAt (retrying events) is when the engine runs the step again: after the step's
	// interval or, when a circuit holds the system's calls, when it lets a probe through.
	NextTryAt *time.Time `json:"next_try_at,omitempty"`
	// GivesUpAt (retrying events of an operation still under way) is the end of the step's
	// retry window: if the step still fails then, it gives up.
	GivesUpAt *time.Time `json:"gives_up_at,omitempty"`
	// Repeats, FirstID and FirstAt (collapse=true): this entry stands for Repeats consecutive
	// retrying events of one step of one operation, from FirstID at FirstAt to ID at CreatedAt;
	// Message and the times are the newest's.
	Repeats int        `json:"repeats,omitempty"`
	FirstID int64      `json:"first_id,omitempty"`
	FirstAt *time.Time `json:"first_at,omitempty"`
}
