package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
)

const actionBind = "bind"

// credentialKubeconfig is the binding credential with the runtime's kubeconfig.
const credentialKubeconfig = "kubeconfig"

// Bind hands out the runtime's kubeconfig (synchronously) and stores the binding with its
// credentials encrypted, so that it can be fetched (bindings_retrievable) and a repeat told from a
// conflict: the same request again is 200 with the same credentials, another one under the same
// binding ID is 409.
func (b *Broker) Bind(ctx context.Context, instanceID, bindingID string, details domain.BindDetails, _ bool) (domain.Binding, error) {
	log := b.logFor(ctx, instanceID).WithField("binding_id", bindingID)
	inst, err := b.liveInstance(ctx, instanceID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.Binding{}, apiresponses.ErrInstanceDoesNotExist
	}
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	if err := belongs(inst, details.ServiceID, details.PlanID); err != nil {
		return domain.Binding{}, badRequest(actionBind, "%v", err)
	}
	if err := noBindingParameters(details.RawParameters); err != nil {
		return domain.Binding{}, badRequest(actionBind, "%v", err)
	}
	request, err := bindRequest(details)
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	if existing, err := b.store.Bindings().GetBinding(ctx, instanceID, bindingID); err == nil {
		return repeatedBind(existing, request)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	prov, ok, err := b.latestOperation(ctx, instanceID, instance.TypeProvision)
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	if !ok || prov.State != storage.StateSucceeded || inst.RuntimeID == "" {
		return domain.Binding{}, unprocessable(actionBind, "instance %s is not provisioned yet", instanceID)
	}
	st, err := b.provisioner.RuntimeStatus(ctx, inst.GlobalAccountID, inst.RuntimeID)
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, fmt.Errorf("reading runtime %s: %w", inst.RuntimeID, err))
	}
	if st.RuntimeConfiguration == nil || st.RuntimeConfiguration.Kubeconfig == nil {
		return domain.Binding{}, unprocessable(actionBind, "runtime %s has no kubeconfig yet", inst.RuntimeID)
	}
	stored, err := b.store.Bindings().InsertBinding(ctx, storage.Binding{
		ID: bindingID, InstanceID: instanceID, Request: request,
		Credentials: storage.Secrets{credentialKubeconfig: *st.RuntimeConfiguration.Kubeconfig},
	})
	if errors.Is(err, storage.ErrAlreadyExists) {
		// A concurrent request with this binding ID won: answer as a repeat of it.
		existing, getErr := b.store.Bindings().GetBinding(ctx, instanceID, bindingID)
		if getErr != nil {
			return domain.Binding{}, internal(log, actionBind, getErr)
		}
		return repeatedBind(existing, request)
	}
	if err != nil {
		return domain.Binding{}, internal(log, actionBind, err)
	}
	return domain.Binding{Credentials: credentials(stored)}, nil
}

// repeatedBind answers a bind request whose binding ID exists: 200 for the same request, 409 for
// another (also when the binding ID belongs to another instance).
func repeatedBind(existing storage.Binding, request []byte) (domain.Binding, error) {
	if !sameJSON(existing.Request, request) {
		return domain.Binding{}, apiresponses.ErrBindingAlreadyExists
	}
	return domain.Binding{AlreadyExists: true, Credentials: credentials(existing)}, nil
}

func credentials(b storage.Binding) map[string]string {
	return map[string]string{credentialKubeconfig: b.Credentials[credentialKubeconfig]}
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

// Unbind removes the stored binding; one that does not exist is 410 Gone (OSB).
func (b *Broker) Unbind(ctx context.Context, instanceID, bindingID string, details domain.UnbindDetails, _ bool) (domain.UnbindSpec, error) {
	log := b.logFor(ctx, instanceID).WithField("binding_id", bindingID)
	inst, err := b.liveInstance(ctx, instanceID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.UnbindSpec{}, apiresponses.ErrInstanceDoesNotExist
	}
	if err != nil {
		return domain.UnbindSpec{}, internal(log, actionBind, err)
	}
	if err := belongs(inst, details.ServiceID, details.PlanID); err != nil {
		return domain.UnbindSpec{}, badRequest(actionBind, "%v", err)
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
	if _, err := b.liveInstance(ctx, instanceID); errors.Is(err, storage.ErrNotFound) {
		return domain.GetBindingSpec{}, notFound(actionBind, "instance %s does not exist", instanceID)
	} else if err != nil {
		return domain.GetBindingSpec{}, internal(log, actionBind, err)
	}
	got, err := b.store.Bindings().GetBinding(ctx, instanceID, bindingID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.GetBindingSpec{}, notFound(actionBind, "binding %s does not exist", bindingID)
	}
	if err != nil {
		return domain.GetBindingSpec{}, internal(log, actionBind, err)
	}
	var req struct {
		Parameters map[string]any `json:"parameters"`
	}
	_ = json.Unmarshal(got.Request, &req)
	return domain.GetBindingSpec{Credentials: credentials(got), Parameters: req.Parameters}, nil
}

func (b *Broker) LastBindingOperation(context.Context, string, string, domain.PollDetails) (domain.LastOperation, error) {
	return domain.LastOperation{}, badRequest(actionBind, "bindings are synchronous")
}

// liveInstance is the instance, ErrNotFound also when it has been deprovisioned.
func (b *Broker) liveInstance(ctx context.Context, instanceID string) (storage.Instance, error) {
	inst, err := b.store.Instances().GetInstance(ctx, instanceID)
	if err == nil && inst.DeletedAt != nil {
		return storage.Instance{}, storage.ErrNotFound
	}
	return inst, err
}

// noBindingParameters enforces the catalog's binding schema: an object without properties.
func noBindingParameters(raw json.RawMessage) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &params); err != nil {
		return errors.New("parameters: must be a JSON object")
	}
	for name := range params {
		return fmt.Errorf("parameters.%s: bindings take no parameters", name)
	}
	return nil
}
