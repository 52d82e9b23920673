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
}

// Status is a runtime's state and its newest operation of each kind.
type Status struct {
	// State: provisioning, provisioned, failed, updating, deprovisioning, deprovisioned.
	State          string     `json:"state"`
	CreatedAt      time.Time  `json:"createdAt"`
	ModifiedAt     time.Time  `json:"modifiedAt"`
	DeletedAt      *time.Time `json:"deletedAt,omitempty"`
	Provisioning   *Operation `json:"provisioning,omitempty"`
	Deprovisioning *Operation `json:"deprovisioning,omitempty"`
	Update         *Operation `json:"update,omitempty"`
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
}

// Page is one page of GET /runtimes.
type Page struct {
	Data       []DTO `json:"data"`
	Count      int   `json:"count"`
	TotalCount int   `json:"totalCount"`
}

// Event is one step event in GET /events.
type Event struct {
	OperationID string    `json:"operation_id"`
	InstanceID  string    `json:"instance_id"`
	Step        string    `json:"step"`
	Type        string    `json:"type"`
	Message     string    `json:"message"`
	DurationMS  int64     `json:"duration_ms"`
	WaitMS      int64     `json:"wait_ms,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}
