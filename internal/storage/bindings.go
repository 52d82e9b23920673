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
}
