package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// inProcess calls the provisioner's service directly, copying every input and output through
// JSON as the GraphQL API does, so that the broker and the provisioner share no pointers.
type inProcess struct {
	svc Client
}

// NewInProcess returns a Client calling svc, the provisioner's service, in the process. It
// behaves like the GraphQL client: inputs and outputs are deep copies (through JSON), a
// provisionRuntime without tenant is a BAD_REQUEST naming the tenant header, and apperr errors
// come back as a fresh *apperr.Error with the same code, field and reason. Other errors are
// returned as they are (the GraphQL API would only say INTERNAL).
func NewInProcess(svc Client) Client {
	return &inProcess{svc: svc}
}

// SignalsFinishedOperations: the embedded provisioner's finished operations wake their waiters.
func (c *inProcess) SignalsFinishedOperations() bool { return true }

func (c *inProcess) ProvisionRuntime(ctx context.Context, tenant string, config gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	if tenant == "" {
		return nil, apperr.BadRequest(TenantHeader, "the %q header is required", TenantHeader)
	}
	in, err := deepCopy(config)
	if err != nil {
		return nil, fmt.Errorf("while provisioning a runtime: copying the input: %w", err)
	}
	out, err := c.svc.ProvisionRuntime(ctx, tenant, in)
	return copyResult("provisioning a runtime", out, err)
}

func (c *inProcess) DeprovisionRuntime(ctx context.Context, tenant, runtimeID string) (string, error) {
	id, err := c.svc.DeprovisionRuntime(ctx, tenant, runtimeID)
	return id, copyErr(err)
}

func (c *inProcess) UpgradeRuntime(ctx context.Context, tenant, runtimeID string, config gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
	in, err := deepCopy(config)
	if err != nil {
		return nil, fmt.Errorf("while upgrading runtime %s: copying the input: %w", runtimeID, err)
	}
	out, err := c.svc.UpgradeRuntime(ctx, tenant, runtimeID, in)
	return copyResult(fmt.Sprintf("upgrading runtime %s", runtimeID), out, err)
}

func (c *inProcess) UpgradeShoot(ctx context.Context, tenant, runtimeID string, config gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	in, err := deepCopy(config)
	if err != nil {
		return nil, fmt.Errorf("while upgrading the shoot of runtime %s: copying the input: %w", runtimeID, err)
	}
	out, err := c.svc.UpgradeShoot(ctx, tenant, runtimeID, in)
	return copyResult(fmt.Sprintf("upgrading the shoot of runtime %s", runtimeID), out, err)
}

func (c *inProcess) HibernateRuntime(ctx context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error) {
	out, err := c.svc.HibernateRuntime(ctx, tenant, runtimeID)
	return copyResult(fmt.Sprintf("hibernating runtime %s", runtimeID), out, err)
}

func (c *inProcess) ReconnectRuntimeAgent(ctx context.Context, tenant, runtimeID string) (string, error) {
	id, err := c.svc.ReconnectRuntimeAgent(ctx, tenant, runtimeID)
	return id, copyErr(err)
}

func (c *inProcess) CreateRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error) {
	out, err := c.svc.CreateRuntimeCredentials(ctx, tenant, runtimeID, name, expirationSeconds)
	return copyResult(fmt.Sprintf("creating credentials %s of runtime %s", name, runtimeID), out, err)
}

func (c *inProcess) RevokeRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string) (string, error) {
	out, err := c.svc.RevokeRuntimeCredentials(ctx, tenant, runtimeID, name)
	return out, copyErr(err)
}

func (c *inProcess) RuntimeStatus(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeStatus, error) {
	out, err := c.svc.RuntimeStatus(ctx, tenant, runtimeID)
	return copyResult(fmt.Sprintf("getting the status of runtime %s", runtimeID), out, err)
}

func (c *inProcess) RuntimeConfiguration(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeConfig, error) {
	out, err := c.svc.RuntimeConfiguration(ctx, tenant, runtimeID)
	return copyResult(fmt.Sprintf("getting the configuration of runtime %s", runtimeID), out, err)
}

func (c *inProcess) RuntimeOperationStatus(ctx context.Context, tenant, operationID string) (*gqlschema.OperationStatus, error) {
	out, err := c.svc.RuntimeOperationStatus(ctx, tenant, operationID)
	if err != nil {
		return nil, copyErr(err)
	}
	return copyOperationStatus(out), nil
}

// copyOperationStatus is deepCopy of an operation status field by field: the broker's waits poll
// it, and the JSON round trip was a fifth of a poll's CPU.
func copyOperationStatus(st *gqlschema.OperationStatus) *gqlschema.OperationStatus {
	if st == nil {
		return nil
	}
	cp := *st
	cp.ID, cp.Message, cp.RuntimeID, cp.CompassRuntimeID = copyString(st.ID), copyString(st.Message), copyString(st.RuntimeID), copyString(st.CompassRuntimeID)
	if st.LastError != nil {
		le := *st.LastError
		cp.LastError = &le
	}
	return &cp
}

func copyString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// copyResult returns a deep copy of the service's result, or its error as copyErr does.
func copyResult[T any](what string, out *T, err error) (*T, error) {
	if err != nil {
		return nil, copyErr(err)
	}
	if out == nil {
		return nil, nil
	}
	cp, err := deepCopy(*out)
	if err != nil {
		return nil, fmt.Errorf("while %s: copying the result: %w", what, err)
	}
	return &cp, nil
}

// copyErr flattens an apperr error into a fresh *apperr.Error, as it would arrive over the wire.
func copyErr(err error) error {
	var appErr *apperr.Error
	if errors.As(err, &appErr) {
		return &apperr.Error{Code: appErr.Code, Field: appErr.Field, Reason: appErr.Reason}
	}
	return err
}

func deepCopy[T any](v T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("encoding %T: %w", v, err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decoding %T: %w", v, err)
	}
	return out, nil
}
