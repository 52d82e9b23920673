// Package clienttest is a hand-written client.Client for the tests of the packages that call the
// Runtime Provisioner (the broker's provisioning, deprovisioning and update steps), and builders
// of the provisioner's answers.
package clienttest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// ErrNotImplemented is what a method whose func is nil returns (wrapped with the method's name).
var ErrNotImplemented = errors.New("not implemented in this test")

// NotImplemented is the error of method when the test gave it no func.
func NotImplemented(method string) error {
	return fmt.Errorf("clienttest.Fake.%s: %w", method, ErrNotImplemented)
}

// Call is one call made to the Fake. Method is the client.Client method's name.
type Call struct {
	Method string
	Tenant string
	ID     string // runtime ID or operation ID, depending on the method; empty for ProvisionRuntime

	// The input, for the methods that take one.
	Provision *gqlschema.ProvisionRuntimeInput
	Upgrade   *gqlschema.UpgradeRuntimeInput
	Shoot     *gqlschema.UpgradeShootInput
	// Name and ExpirationSeconds of the credentials methods.
	Name              string
	ExpirationSeconds int
}

// Fake is a client.Client: each method is answered by the matching func (nil: an error wrapping
// ErrNotImplemented); every call is recorded first, whatever the answer. Set the funcs before the
// code under test runs; the record is safe for concurrent use.
type Fake struct {
	ProvisionRuntimeFunc         func(tenant string, in gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error)
	DeprovisionRuntimeFunc       func(tenant, runtimeID string) (string, error)
	UpgradeRuntimeFunc           func(tenant, runtimeID string, in gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error)
	UpgradeShootFunc             func(tenant, runtimeID string, in gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error)
	HibernateRuntimeFunc         func(tenant, runtimeID string) (*gqlschema.OperationStatus, error)
	ReconnectRuntimeAgentFunc    func(tenant, runtimeID string) (string, error)
	RuntimeStatusFunc            func(tenant, runtimeID string) (*gqlschema.RuntimeStatus, error)
	RuntimeOperationStatusFunc   func(tenant, operationID string) (*gqlschema.OperationStatus, error)
	CreateRuntimeCredentialsFunc func(tenant, runtimeID, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error)
	RevokeRuntimeCredentialsFunc func(tenant, runtimeID, name string) (string, error)

	mu    sync.Mutex
	calls []Call
}

var _ client.Client = (*Fake)(nil)

func (f *Fake) record(c Call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// Calls is every call so far, in order (a copy).
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// CallsTo is the calls so far to the named method, in order.
func (f *Fake) CallsTo(method string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Reset forgets the calls so far.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

func (f *Fake) ProvisionRuntime(_ context.Context, tenant string, in gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	f.record(Call{Method: "ProvisionRuntime", Tenant: tenant, Provision: &in})
	if f.ProvisionRuntimeFunc == nil {
		return nil, NotImplemented("ProvisionRuntime")
	}
	return f.ProvisionRuntimeFunc(tenant, in)
}

func (f *Fake) DeprovisionRuntime(_ context.Context, tenant, runtimeID string) (string, error) {
	f.record(Call{Method: "DeprovisionRuntime", Tenant: tenant, ID: runtimeID})
	if f.DeprovisionRuntimeFunc == nil {
		return "", NotImplemented("DeprovisionRuntime")
	}
	return f.DeprovisionRuntimeFunc(tenant, runtimeID)
}

func (f *Fake) UpgradeRuntime(_ context.Context, tenant, runtimeID string, in gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
	f.record(Call{Method: "UpgradeRuntime", Tenant: tenant, ID: runtimeID, Upgrade: &in})
	if f.UpgradeRuntimeFunc == nil {
		return nil, NotImplemented("UpgradeRuntime")
	}
	return f.UpgradeRuntimeFunc(tenant, runtimeID, in)
}

func (f *Fake) UpgradeShoot(_ context.Context, tenant, runtimeID string, in gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	f.record(Call{Method: "UpgradeShoot", Tenant: tenant, ID: runtimeID, Shoot: &in})
	if f.UpgradeShootFunc == nil {
		return nil, NotImplemented("UpgradeShoot")
	}
	return f.UpgradeShootFunc(tenant, runtimeID, in)
}

func (f *Fake) HibernateRuntime(_ context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error) {
	f.record(Call{Method: "HibernateRuntime", Tenant: tenant, ID: runtimeID})
	if f.HibernateRuntimeFunc == nil {
		return nil, NotImplemented("HibernateRuntime")
	}
	return f.HibernateRuntimeFunc(tenant, runtimeID)
}

func (f *Fake) ReconnectRuntimeAgent(_ context.Context, tenant, runtimeID string) (string, error) {
	f.record(Call{Method: "ReconnectRuntimeAgent", Tenant: tenant, ID: runtimeID})
	if f.ReconnectRuntimeAgentFunc == nil {
		return "", NotImplemented("ReconnectRuntimeAgent")
	}
	return f.ReconnectRuntimeAgentFunc(tenant, runtimeID)
}

func (f *Fake) CreateRuntimeCredentials(_ context.Context, tenant, runtimeID, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error) {
	f.record(Call{Method: "CreateRuntimeCredentials", Tenant: tenant, ID: runtimeID, Name: name, ExpirationSeconds: expirationSeconds})
	if f.CreateRuntimeCredentialsFunc == nil {
		return nil, NotImplemented("CreateRuntimeCredentials")
	}
	return f.CreateRuntimeCredentialsFunc(tenant, runtimeID, name, expirationSeconds)
}

func (f *Fake) RevokeRuntimeCredentials(_ context.Context, tenant, runtimeID, name string) (string, error) {
	f.record(Call{Method: "RevokeRuntimeCredentials", Tenant: tenant, ID: runtimeID, Name: name})
	if f.RevokeRuntimeCredentialsFunc == nil {
		return "", NotImplemented("RevokeRuntimeCredentials")
	}
	return f.RevokeRuntimeCredentialsFunc(tenant, runtimeID, name)
}

func (f *Fake) RuntimeStatus(_ context.Context, tenant, runtimeID string) (*gqlschema.RuntimeStatus, error) {
	f.record(Call{Method: "RuntimeStatus", Tenant: tenant, ID: runtimeID})
	if f.RuntimeStatusFunc == nil {
		return nil, NotImplemented("RuntimeStatus")
	}
	return f.RuntimeStatusFunc(tenant, runtimeID)
}

// RuntimeConfiguration is RuntimeStatusFunc's runtimeConfiguration.
func (f *Fake) RuntimeConfiguration(_ context.Context, tenant, runtimeID string) (*gqlschema.RuntimeConfig, error) {
	f.record(Call{Method: "RuntimeConfiguration", Tenant: tenant, ID: runtimeID})
	if f.RuntimeStatusFunc == nil {
		return nil, NotImplemented("RuntimeConfiguration")
	}
	st, err := f.RuntimeStatusFunc(tenant, runtimeID)
	if err != nil || st == nil {
		return nil, err
	}
	return st.RuntimeConfiguration, nil
}

func (f *Fake) RuntimeOperationStatus(_ context.Context, tenant, operationID string) (*gqlschema.OperationStatus, error) {
	f.record(Call{Method: "RuntimeOperationStatus", Tenant: tenant, ID: operationID})
	if f.RuntimeOperationStatusFunc == nil {
		return nil, NotImplemented("RuntimeOperationStatus")
	}
	return f.RuntimeOperationStatusFunc(tenant, operationID)
}
