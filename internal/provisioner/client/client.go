// Package client is how the broker talks to the Runtime Provisioner: one interface with two
// implementations, in-process (the provisioner's service itself) and GraphQL over HTTP. Both
// pass the same contract test.
package client

import (
	"context"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// Client is the provisioner's API. tenant scopes every call: a runtime of another tenant is
// not found. Errors carry an apperr code (BAD_REQUEST with the field, NOT_FOUND, CONFLICT).
type Client interface {
	ProvisionRuntime(ctx context.Context, tenant string, config gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error)
	DeprovisionRuntime(ctx context.Context, tenant, runtimeID string) (string, error)
	UpgradeRuntime(ctx context.Context, tenant, runtimeID string, config gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error)
	UpgradeShoot(ctx context.Context, tenant, runtimeID string, config gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error)
	HibernateRuntime(ctx context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error)
	ReconnectRuntimeAgent(ctx context.Context, tenant, runtimeID string) (string, error)
	RuntimeStatus(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeStatus, error)
	// RuntimeConfiguration is RuntimeStatus's runtimeConfiguration alone (the cluster, Kyma,
	// the kubeconfig, the allocation): what the broker's steps read, without the runtime's
	// operations (over GraphQL, the same query selecting only it).
	RuntimeConfiguration(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeConfig, error)
	RuntimeOperationStatus(ctx context.Context, tenant, operationID string) (*gqlschema.OperationStatus, error)
	// CreateRuntimeCredentials creates (again: a new token of the same account) the account
	// name in the runtime's namespace and returns a kubeconfig with a token valid for
	// expirationSeconds; NOT_SUPPORTED for backends without scoped credentials.
	CreateRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error)
	// RevokeRuntimeCredentials deletes the account: its tokens are refused from then on.
	RevokeRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string) (string, error)
}

// Signaling is a Client whose operations, once finished, wake the engine operations waiting
// for them, so that their polls are only a fallback: the in-process client (the embedded
// provisioner's engine writes through provisioner.WakeWaiters, as the broker wires it).
type Signaling interface {
	SignalsFinishedOperations() bool
}

// FinishedSignal is the in-process signal (engine.Signals) given when the provisioner's
// operation finishes; a step that waits for it says so with engine.Operation.WaitIsSignaledBy.
func FinishedSignal(operationID string) string {
	return "provisioner-operation-finished/" + operationID
}
