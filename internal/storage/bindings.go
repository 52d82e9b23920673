package storage

import (
	"context"
	"encoding/json"
	"time"
)

// Binding is an OSB service binding: the credentials handed out for an instance (encrypted at
// rest) and the request that created them, so that a repeat can be told from a conflict.
type Binding struct {
	// ID is the platform's binding_id (OSB: globally unique).
	ID         string
	InstanceID string
	// Request is the normalised bind request (service_id, plan_id, parameters, bind_resource).
	Request   json.RawMessage
	CreatedAt time.Time
	// Credentials are what the binding hands out (a kubeconfig).
	Credentials Secrets
}

// Bindings stores OSB service bindings.
type Bindings interface {
	// InsertBinding stores a new binding; ErrAlreadyExists when the ID is taken.
	InsertBinding(ctx context.Context, b Binding) (Binding, error)
	// GetBinding returns the binding of the instance; ErrNotFound when there is none.
	GetBinding(ctx context.Context, instanceID, bindingID string) (Binding, error)
	// DeleteBinding removes the binding of the instance; ErrNotFound when there was none.
	DeleteBinding(ctx context.Context, instanceID, bindingID string) error
	// ReadForBind is what a bind request reads, in one round trip: the instance (ErrNotFound
	// when there is none, deleted or not), the binding bindingID whoever's instance it is, and
	// the state of the instance's newest operation of opType. On a slow database every round
	// trip costs the request a full network delay.
	ReadForBind(ctx context.Context, instanceID, bindingID, opType string) (BindRead, error)
}

// BindRead is what Bindings.ReadForBind found.
type BindRead struct {
	Instance Instance
	// Binding is the binding with the ID asked for, of this instance or another (nil when
	// there is none).
	Binding *Binding
	// LatestState is the state of the instance's newest operation of the type asked for (""
	// when it has none).
	LatestState OperationState
}
