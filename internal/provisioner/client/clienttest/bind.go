package clienttest

import "github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"

// The Bind methods are for a test whose own fake keeps the answering funcs in fields of its own,
// set after the Fake is built: each sets a Func field to call *fn as *fn is at each call (nil: not
// implemented).

func (f *Fake) BindProvisionRuntime(fn *func(tenant string, in gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error)) {
	f.ProvisionRuntimeFunc = func(tenant string, in gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
		if *fn == nil {
			return nil, NotImplemented("ProvisionRuntime")
		}
		return (*fn)(tenant, in)
	}
}

func (f *Fake) BindDeprovisionRuntime(fn *func(tenant, runtimeID string) (string, error)) {
	f.DeprovisionRuntimeFunc = bindID("DeprovisionRuntime", fn)
}

func (f *Fake) BindUpgradeRuntime(fn *func(tenant, runtimeID string, in gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error)) {
	f.UpgradeRuntimeFunc = bindInput("UpgradeRuntime", fn)
}

func (f *Fake) BindUpgradeShoot(fn *func(tenant, runtimeID string, in gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error)) {
	f.UpgradeShootFunc = bindInput("UpgradeShoot", fn)
}

func (f *Fake) BindHibernateRuntime(fn *func(tenant, runtimeID string) (*gqlschema.OperationStatus, error)) {
	f.HibernateRuntimeFunc = bindID("HibernateRuntime", fn)
}

func (f *Fake) BindReconnectRuntimeAgent(fn *func(tenant, runtimeID string) (string, error)) {
	f.ReconnectRuntimeAgentFunc = bindID("ReconnectRuntimeAgent", fn)
}

func (f *Fake) BindRuntimeStatus(fn *func(tenant, runtimeID string) (*gqlschema.RuntimeStatus, error)) {
	f.RuntimeStatusFunc = bindID("RuntimeStatus", fn)
}

func (f *Fake) BindRuntimeOperationStatus(fn *func(tenant, operationID string) (*gqlschema.OperationStatus, error)) {
	f.RuntimeOperationStatusFunc = bindID("RuntimeOperationStatus", fn)
}

// bindID late-binds a method that takes a tenant and an ID.
func bindID[R any](method string, fn *func(tenant, id string) (R, error)) func(tenant, id string) (R, error) {
	return func(tenant, id string) (R, error) {
		if *fn == nil {
			var zero R
			return zero, NotImplemented(method)
		}
		return (*fn)(tenant, id)
	}
}

// bindInput late-binds a method that takes a tenant, a runtime ID and an input.
func bindInput[I any](method string, fn *func(tenant, runtimeID string, in I) (*gqlschema.OperationStatus, error)) func(tenant, runtimeID string, in I) (*gqlschema.OperationStatus, error) {
	return func(tenant, runtimeID string, in I) (*gqlschema.OperationStatus, error) {
		if *fn == nil {
			return nil, NotImplemented(method)
		}
		return (*fn)(tenant, runtimeID, in)
	}
}
