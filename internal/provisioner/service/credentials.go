package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Bounds of createRuntimeCredentials' expirationSeconds: the API server issues no token
// shorter than 10 minutes; 90 days is the longest a credential should live.
const (
	MinCredentialSeconds = 600
	MaxCredentialSeconds = 90 * 24 * 3600
)

// ReservedAccount is the runtime's own account (its kubeconfig); bindings cannot take it.
const ReservedAccount = "runtime"

// CreateRuntimeCredentials issues a kubeconfig of the account name, of the runtime's own
// namespace, valid for expirationSeconds.
func (s *Service) CreateRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error) {
	if err := validAccount(name); err != nil {
		return nil, err
	}
	if expirationSeconds < MinCredentialSeconds || expirationSeconds > MaxCredentialSeconds {
		return nil, apperr.BadRequest("expirationSeconds", "must be between %d and %d, not %d", MinCredentialSeconds, MaxCredentialSeconds, expirationSeconds)
	}
	issuer, sp, err := s.issuer(ctx, tenant, runtimeID)
	if err != nil {
		return nil, err
	}
	c, err := issuer.IssueCredentials(ctx, sp, name, time.Duration(expirationSeconds)*time.Second)
	if err != nil {
		return nil, credentialsError(runtimeID, "issuing credentials "+name, err)
	}
	s.log.WithFields(logrus.Fields{"runtime_id": runtimeID, "account": name, "expires_at": c.ExpiresAt}).Info("runtime credentials issued")
	return &gqlschema.RuntimeCredentials{Kubeconfig: c.Kubeconfig, ExpiresAt: c.ExpiresAt.UTC().Format(time.RFC3339)}, nil
}

// RevokeRuntimeCredentials deletes the account name from the runtime's namespace.
func (s *Service) RevokeRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string) (string, error) {
	if err := validAccount(name); err != nil {
		return "", err
	}
	issuer, sp, err := s.issuer(ctx, tenant, runtimeID)
	if err != nil {
		return "", err
	}
	if err := issuer.RevokeCredentials(ctx, sp, name); err != nil {
		return "", credentialsError(runtimeID, "revoking credentials "+name, err)
	}
	s.log.WithFields(logrus.Fields{"runtime_id": runtimeID, "account": name}).Info("runtime credentials revoked")
	return name, nil
}

func validAccount(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return apperr.BadRequest("name", "%q is not a valid account name: %v", name, errs)
	}
	if name == ReservedAccount {
		return apperr.BadRequest("name", "%q is the runtime's own account", name)
	}
	return nil
}

// issuer is the runtime's backend, if it issues scoped credentials, and its view of the runtime.
func (s *Service) issuer(ctx context.Context, tenant, runtimeID string) (infrastructure.CredentialIssuer, infrastructure.Spec, error) {
	rt, err := s.runtime(ctx, tenant, runtimeID, false)
	if err != nil {
		return nil, infrastructure.Spec{}, err
	}
	b, err := s.backends.Get(rt.Backend)
	if err != nil {
		return nil, infrastructure.Spec{}, fmt.Errorf("finding backend %q of runtime %s: %w", rt.Backend, rt.ID, err)
	}
	issuer, ok := b.(infrastructure.CredentialIssuer)
	if !ok {
		return nil, infrastructure.Spec{}, apperr.NotSupported("runtime %s runs on backend %q, which has no credentials scoped to a runtime", rt.ID, rt.Backend)
	}
	cfg, err := operations.DecodeRuntimeConfig(rt)
	if err != nil {
		return nil, infrastructure.Spec{}, err
	}
	return issuer, operations.RuntimeSpec(rt.ID, rt.Tenant, cfg), nil
}

func credentialsError(runtimeID, what string, err error) error {
	switch {
	case errors.Is(err, infrastructure.ErrNotSupported):
		return apperr.NotSupported("runtime %s: %s: %v", runtimeID, what, err)
	case errors.Is(err, infrastructure.ErrNotFound):
		return apperr.Conflict("runtime %s has no cluster yet: %v", runtimeID, err)
	}
	return fmt.Errorf("runtime %s: %s: %w", runtimeID, what, err)
}

// allocationOutput is the runtime's stored allocation, nil when it has none.
func allocationOutput(rt storage.Runtime) (*gqlschema.Allocation, error) {
	if len(rt.Allocation) == 0 {
		return nil, nil
	}
	var a infrastructure.Allocation
	if err := json.Unmarshal(rt.Allocation, &a); err != nil {
		return nil, fmt.Errorf("decoding the allocation of runtime %s: %w", rt.ID, err)
	}
	out := &gqlschema.Allocation{Host: a.Host}
	str := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	num := func(v int) *int {
		if v == 0 {
			return nil
		}
		return &v
	}
	out.AudienceURL, out.DataDir, out.Namespace = str(a.AudienceURL), str(a.DataDir), str(a.Namespace)
	out.CPU, out.MemoryGb, out.Slots = num(a.CPU), num(a.MemoryGB), num(a.Slots)
	if a.StorageBytes != 0 {
		out.StorageBytes = &a.StorageBytes
	}
	return out, nil
}
