package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
)

const actionBind = "bind"

// Binding credentials: the kubeconfig handed out, and when its token expires. The account is
// kept (encrypted with them) so that unbind can revoke it.
const (
	credentialKubeconfig = "kubeconfig"
	credentialExpiresAt  = "expires_at"
	secretAccount        = "account"
)

// Bind hands out credentials of the binding's own (synchronously): a ServiceAccount of its own
// in the runtime's namespace and a token of it valid for the parameter expiration_seconds
// (600 to 7200, default 600), for runtimes whose backend scopes credentials (static,
// kubernetes); the runtime's kubeconfig for the others (gardener, simulated). It stores the
// binding with its credentials encrypted, so that it can be fetched (bindings_retrievable) and
// a repeat told from a conflict: the same request again is 200 with the same credentials,
// another one under the same binding ID is 409.
func (b *Broker) Bind(ctx context.Context, instanceID, bindingID string, details domain.BindDetails, _ bool) (domain.Binding, error) {
	log := b.logFor(ctx, instanceID).WithField("binding_id", bindingID)
	// One read for the instance, the binding ID and the provisioning: on a slow database each
	// round trip costs the request a full network delay.
	read, err := b.readForBind(ctx, instanceID, bindingID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.Binding{}, apiresponses.ErrInstanceDoesNotExist
	}
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	inst := read.Instance
	if err := belongs(inst, details.ServiceID, details.PlanID); err != nil {
		return domain.Binding{}, badRequest(actionBind, "%v", err)
	}
	expiration, err := bindingParameters(details.RawParameters)
	if err != nil {
		return domain.Binding{}, badRequest(actionBind, "%v", err)
	}
	request, err := bindRequest(details)
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	if read.Binding != nil {
		return repeatedBind(instanceID, *read.Binding, request)
	}
	if read.LatestState != storage.StateSucceeded || inst.RuntimeID == "" {
		return domain.Binding{}, unprocessable(actionBind, "instance %s is not provisioned yet", instanceID)
	}
	secrets, err := b.bindingCredentials(ctx, inst, bindingID, expiration)
	if err != nil {
		var unready *notReadyError
		if errors.As(err, &unready) {
			return domain.Binding{}, unprocessable(actionBind, "%v", err)
		}
		return domain.Binding{}, internal(log, actionBind, err)
	}
	stored, err := b.store.Bindings().InsertBinding(ctx, storage.Binding{
		ID: bindingID, InstanceID: instanceID, Request: request, Credentials: secrets,
	})
	if errors.Is(err, storage.ErrAlreadyExists) {
		// A concurrent request with this binding ID won: answer as a repeat of it.
		existing, getErr := b.store.Bindings().GetBinding(ctx, instanceID, bindingID)
		if errors.Is(getErr, storage.ErrNotFound) {
			// Another instance's binding took the ID.
			return domain.Binding{}, apiresponses.ErrBindingAlreadyExists
		}
		if getErr != nil {
			return domain.Binding{}, internal(log, actionBind, getErr)
		}
		return repeatedBind(instanceID, existing, request)
	}
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	return domain.Binding{Credentials: credentials(stored)}, nil
}

// repeatedBind answers a bind request whose binding ID exists: 200 for the same request, 409 for
// another (also when the binding ID belongs to another instance).
func repeatedBind(instanceID string, existing storage.Binding, request []byte) (domain.Binding, error) {
	if existing.InstanceID != instanceID || !sameJSON(existing.Request, request) {
		return domain.Binding{}, apiresponses.ErrBindingAlreadyExists
	}
	return domain.Binding{AlreadyExists: true, Credentials: credentials(existing)}, nil
}

func credentials(b storage.Binding) map[string]string {
	out := map[string]string{credentialKubeconfig: b.Credentials[credentialKubeconfig]}
	if exp := b.Credentials[credentialExpiresAt]; exp != "" {
		out[credentialExpiresAt] = exp
	}
	return out
}

// notReadyError: the runtime cannot give credentials yet (422).
type notReadyError struct{ msg string }

func (e *notReadyError) Error() string { return e.msg }

// bindingAccount is the binding's ServiceAccount name: a DNS label derived from the binding
// ID, so that a repeated or concurrent bind finds the same account.
func bindingAccount(bindingID string) string {
	sum := sha256.Sum256([]byte(bindingID))
	return "binding-" + hex.EncodeToString(sum[:12])
}

// bindingCredentials issues the binding's own account and token, or, when the runtime's
// backend has no scoped credentials, hands out the runtime's kubeconfig.
func (b *Broker) bindingCredentials(ctx context.Context, inst storage.Instance, bindingID string, expiration int) (storage.Secrets, error) {
	account := bindingAccount(bindingID)
	creds, err := b.provisioner.CreateRuntimeCredentials(ctx, inst.GlobalAccountID, inst.RuntimeID, account, expiration)
	switch {
	case err == nil:
		return storage.Secrets{credentialKubeconfig: creds.Kubeconfig, credentialExpiresAt: creds.ExpiresAt, secretAccount: account}, nil
	case apperr.CodeOf(err) == apperr.CodeConflict:
		return nil, &notReadyError{fmt.Sprintf("runtime %s cannot give credentials yet: %v", inst.RuntimeID, err)}
	case apperr.CodeOf(err) != apperr.CodeNotSupported:
		return nil, fmt.Errorf("creating credentials of runtime %s: %w", inst.RuntimeID, err)
	}
	// The configuration alone: the runtime's status would read its operations too.
	rc, err := b.provisioner.RuntimeConfiguration(ctx, inst.GlobalAccountID, inst.RuntimeID)
	if err != nil {
		return nil, fmt.Errorf("reading runtime %s: %w", inst.RuntimeID, err)
	}
	if rc == nil || rc.Kubeconfig == nil {
		return nil, &notReadyError{fmt.Sprintf("runtime %s has no kubeconfig yet", inst.RuntimeID)}
	}
	return storage.Secrets{credentialKubeconfig: *rc.Kubeconfig}, nil
}

// bindRequest is what makes two bind requests the same one.
func bindRequest(d domain.BindDetails) ([]byte, error) {
	params := d.RawParameters
	if t := bytes.TrimSpace(params); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		params = json.RawMessage(`{}`)
	}
	return json.Marshal(struct {
		ServiceID    string               `json:"service_id"`
		PlanID       string               `json:"plan_id"`
		AppGUID      string               `json:"app_guid,omitempty"`
		BindResource *domain.BindResource `json:"bind_resource,omitempty"`
		Parameters   json.RawMessage      `json:"parameters"`
	}{d.ServiceID, d.PlanID, d.AppGUID, d.BindResource, params})
}

// Unbind revokes the binding's own account (its token is refused from then on) and removes
// the stored binding; one that does not exist is 410 Gone (OSB). If revoking fails the binding
// stays, so that the platform's retry revokes it.
func (b *Broker) Unbind(ctx context.Context, instanceID, bindingID string, details domain.UnbindDetails, _ bool) (domain.UnbindSpec, error) {
	log := b.logFor(ctx, instanceID).WithField("binding_id", bindingID)
	inst, existing, err := b.instanceAndBinding(ctx, instanceID, bindingID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.UnbindSpec{}, apiresponses.ErrInstanceDoesNotExist
	}
	if err != nil {
		return domain.UnbindSpec{}, internal(log, actionBind, err)
	}
	if err := belongs(inst, details.ServiceID, details.PlanID); err != nil {
		return domain.UnbindSpec{}, badRequest(actionBind, "%v", err)
	}
	if existing == nil {
		return domain.UnbindSpec{}, apiresponses.ErrBindingDoesNotExist
	}
	if account := existing.Credentials[secretAccount]; account != "" {
		if _, err := b.provisioner.RevokeRuntimeCredentials(ctx, inst.GlobalAccountID, inst.RuntimeID, account); err != nil && apperr.CodeOf(err) != apperr.CodeNotFound {
			return domain.UnbindSpec{}, internal(log, actionBind, fmt.Errorf("revoking credentials of binding %s: %w", bindingID, err))
		}
	}
	err = b.store.Bindings().DeleteBinding(ctx, instanceID, bindingID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.UnbindSpec{}, apiresponses.ErrBindingDoesNotExist
	}
	if err != nil {
		return domain.UnbindSpec{}, internal(log, actionBind, err)
	}
	return domain.UnbindSpec{}, nil
}

// GetBinding returns a stored binding (the catalog says bindings_retrievable).
func (b *Broker) GetBinding(ctx context.Context, instanceID, bindingID string, _ domain.FetchBindingDetails) (domain.GetBindingSpec, error) {
	log := b.logFor(ctx, instanceID).WithField("binding_id", bindingID)
	_, got, err := b.instanceAndBinding(ctx, instanceID, bindingID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.GetBindingSpec{}, notFound(actionBind, "instance %s does not exist", instanceID)
	}
	if err != nil {
		return domain.GetBindingSpec{}, internal(log, actionBind, err)
	}
	if got == nil {
		return domain.GetBindingSpec{}, notFound(actionBind, "binding %s does not exist", bindingID)
	}
	var req struct {
		Parameters map[string]any `json:"parameters"`
	}
	_ = json.Unmarshal(got.Request, &req)
	return domain.GetBindingSpec{Credentials: credentials(*got), Parameters: req.Parameters}, nil
}

func (b *Broker) LastBindingOperation(context.Context, string, string, domain.PollDetails) (domain.LastOperation, error) {
	return domain.LastOperation{}, badRequest(actionBind, "bindings are synchronous")
}

// readForBind reads the live instance (ErrNotFound also when deprovisioned), the binding of
// that ID (any instance's), and the state of its newest provisioning in one database round trip.
func (b *Broker) readForBind(ctx context.Context, instanceID, bindingID string) (storage.BindRead, error) {
	read, err := b.store.Bindings().ReadForBind(ctx, instanceID, bindingID, instance.TypeProvision)
	if err == nil && read.Instance.DeletedAt != nil {
		err = storage.ErrNotFound
	}
	return read, err
}

// instanceAndBinding is readForBind's instance and its own binding (nil when the instance has
// none by that ID).
func (b *Broker) instanceAndBinding(ctx context.Context, instanceID, bindingID string) (storage.Instance, *storage.Binding, error) {
	read, err := b.readForBind(ctx, instanceID, bindingID)
	if err != nil || read.Binding == nil || read.Binding.InstanceID != instanceID {
		return read.Instance, nil, err
	}
	return read.Instance, read.Binding, nil
}

// liveInstance is the instance, ErrNotFound also when it has been deprovisioned.
func (b *Broker) liveInstance(ctx context.Context, instanceID string) (storage.Instance, error) {
	inst, err := b.store.Instances().GetInstance(ctx, instanceID)
	if err == nil && inst.DeletedAt != nil {
		return storage.Instance{}, storage.ErrNotFound
	}
	return inst, err
}

// bindingParameters enforces the catalog's binding schema and returns expiration_seconds.
func bindingParameters(raw json.RawMessage) (int, error) {
	expiration := catalog.BindingExpirationDefault
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return expiration, nil
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &params); err != nil {
		return 0, errors.New("parameters: must be a JSON object")
	}
	for name, v := range params {
		if name != "expiration_seconds" {
			return 0, fmt.Errorf("parameters.%s: unknown parameter (bindings take expiration_seconds only)", name)
		}
		var i int64
		// json.Number would take "600" (a string) too: the schema says integer.
		if err := json.Unmarshal(v, &i); err != nil {
			return 0, errors.New("parameters.expiration_seconds: must be an integer")
		}
		if i < catalog.BindingExpirationMin || i > catalog.BindingExpirationMax {
			return 0, fmt.Errorf("parameters.expiration_seconds: must be between %d and %d, not %d", catalog.BindingExpirationMin, catalog.BindingExpirationMax, i)
		}
		expiration = int(i)
	}
	return expiration, nil
}
