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

// Bind returns the runtime's kubeconfig (synchronously; bindings are not stored).
func (b *Broker) Bind(ctx context.Context, instanceID, _ string, details domain.BindDetails, _ bool) (domain.Binding, error) {
	log := b.logFor(ctx, instanceID)
	inst, err := b.store.Instances().GetInstance(ctx, instanceID)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && inst.DeletedAt != nil) {
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
	return domain.Binding{Credentials: map[string]string{"kubeconfig": *st.RuntimeConfiguration.Kubeconfig}}, nil
}

// Unbind has nothing to remove: bindings hand out the runtime's kubeconfig and keep no state.
func (b *Broker) Unbind(context.Context, string, string, domain.UnbindDetails, bool) (domain.UnbindSpec, error) {
	return domain.UnbindSpec{}, nil
}

func (b *Broker) GetBinding(context.Context, string, string, domain.FetchBindingDetails) (domain.GetBindingSpec, error) {
	return domain.GetBindingSpec{}, notFound(actionBind, "bindings are not retrievable")
}

func (b *Broker) LastBindingOperation(context.Context, string, string, domain.PollDetails) (domain.LastOperation, error) {
	return domain.LastOperation{}, badRequest(actionBind, "bindings are synchronous")
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
