package broker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
)

const actionGetInstance = "get_instance"

// GetInstance returns the instance's plan, parameters and dashboard once it is provisioned;
// before that (and after deprovisioning) it is not found.
func (b *Broker) GetInstance(ctx context.Context, instanceID string, _ domain.FetchInstanceDetails) (domain.GetInstanceDetailsSpec, error) {
	log := b.logFor(ctx, instanceID)
	inst, err := b.liveInstance(ctx, instanceID)
	if errors.Is(err, storage.ErrNotFound) {
		return domain.GetInstanceDetailsSpec{}, notFound(actionGetInstance, "instance %s does not exist", instanceID)
	}
	if err != nil {
		return domain.GetInstanceDetailsSpec{}, internal(log, actionGetInstance, err)
	}
	prov, ok, err := b.latestOperation(ctx, instanceID, instance.TypeProvision)
	if err != nil {
		return domain.GetInstanceDetailsSpec{}, internal(log, actionGetInstance, err)
	}
	if !ok || prov.State != storage.StateSucceeded {
		return domain.GetInstanceDetailsSpec{}, notFound(actionGetInstance, "instance %s is not provisioned", instanceID)
	}
	if running, ok, err := b.activeOperation(ctx, instanceID); err != nil {
		return domain.GetInstanceDetailsSpec{}, internal(log, actionGetInstance, err)
	} else if ok && running.Type == instance.TypeUpdate {
		// OSB: an instance being updated cannot be fetched (its parameters are changing).
		return domain.GetInstanceDetailsSpec{}, apiresponses.ErrConcurrentInstanceAccess
	}
	var params any
	if err := json.Unmarshal(inst.Parameters, &params); err != nil {
		return domain.GetInstanceDetailsSpec{}, internal(log, actionGetInstance, err)
	}
	return domain.GetInstanceDetailsSpec{ServiceID: inst.ServiceID, PlanID: inst.PlanID, DashboardURL: inst.DashboardURL, Parameters: params}, nil
}
