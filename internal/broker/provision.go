package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
	"github.com/sirupsen/logrus"
)

const actionProvision = "provision"

func (b *Broker) Provision(ctx context.Context, instanceID string, details domain.ProvisionDetails, asyncAllowed bool) (domain.ProvisionedServiceSpec, error) {
	log := b.logFor(ctx, instanceID).WithField("plan_id", details.PlanID)
	if !asyncAllowed {
		return domain.ProvisionedServiceSpec{}, apiresponses.ErrAsyncRequired
	}
	if details.ServiceID != ServiceID {
		return domain.ProvisionedServiceSpec{}, badRequest(actionProvision, "service_id: unknown service %q", details.ServiceID)
	}
	plan, ok := b.catalog.Plan(details.PlanID)
	if !ok {
		return domain.ProvisionedServiceSpec{}, badRequest(actionProvision, "plan_id: unknown or disabled plan %q", details.PlanID)
	}
	region := b.region(ctx)
	rawContext := cfContext(details)
	v, err := b.catalog.ValidateProvision(plan.ID, region, details.RawParameters, rawContext)
	if err != nil {
		return domain.ProvisionedServiceSpec{}, badRequest(actionProvision, "%v", err)
	}
	params, err := json.Marshal(v.Parameters)
	if err != nil {
		return domain.ProvisionedServiceSpec{}, internal(log, actionProvision, err)
	}
	// A repeated request is told by the insert (the instance exists, trials included), not by a
	// read before it: a read per provisioning for the rare repeat.
	data := instance.ProvisioningData{
		ServiceID: details.ServiceID, PlanID: plan.ID, PlanName: plan.Name, Provider: v.Provider,
		PlatformRegion: region, Parameters: v.Parameters, Context: v.Context,
	}
	op, err := engine.NewOperation(instance.TypeProvision, instanceID, data, b.cfg.OperationTimeout, b.now())
	if err != nil {
		return domain.ProvisionedServiceSpec{}, internal(log, actionProvision, err)
	}
	if v.SMCredentials != nil {
		v.SMCredentials.Put(&op.Secrets) // encrypted with the operation, never in its data
	}
	inst := storage.Instance{
		InstanceID: instanceID, GlobalAccountID: v.Context.GlobalAccountID, SubAccountID: v.Context.SubAccountID,
		ServiceID: details.ServiceID, PlanID: plan.ID, ProviderRegion: v.Parameters.Region, Parameters: params,
	}
	insert := b.store.Instances().InsertInstanceWithOperation
	if plan.Trial {
		insert = b.store.Instances().InsertUniqueInstanceWithOperation // one per global account
	}
	_, op, err = insert(ctx, inst, op)
	var quota *storage.QuotaError
	if errors.As(err, &quota) {
		return domain.ProvisionedServiceSpec{}, badRequest(actionProvision, "plan_id: the global account %s already has a trial runtime (instance %s); only one is allowed", v.Context.GlobalAccountID, quota.InstanceID)
	}
	if errors.Is(err, storage.ErrAlreadyExists) {
		// A repeat, or a concurrent request that won the race: answer as for a repeat.
		existing, getErr := b.store.Instances().GetInstance(ctx, instanceID)
		if getErr != nil {
			return domain.ProvisionedServiceSpec{}, internal(log, actionProvision, getErr)
		}
		return b.repeatedProvision(ctx, existing, plan.ID, v.Context, params, log)
	}
	if err != nil {
		return domain.ProvisionedServiceSpec{}, internal(log, actionProvision, err)
	}
	log.WithFields(logrus.Fields{"operation_id": op.ID, "global_account_id": v.Context.GlobalAccountID}).Info("provisioning accepted")
	return domain.ProvisionedServiceSpec{IsAsync: true, OperationData: op.ID}, nil
}

// repeatedProvision answers a provision request for an instance that exists: the same request
// gets its operation (202) or, once done, 200; a different one (plan, parameters, or the
// global account or subaccount it belongs to) is a conflict (409).
func (b *Broker) repeatedProvision(ctx context.Context, existing storage.Instance, planID string, c instance.Context, params []byte, log logrus.FieldLogger) (domain.ProvisionedServiceSpec, error) {
	if existing.DeletedAt != nil || existing.PlanID != planID || !sameJSON(existing.Parameters, params) ||
		existing.GlobalAccountID != c.GlobalAccountID || existing.SubAccountID != c.SubAccountID {
		return domain.ProvisionedServiceSpec{}, apiresponses.ErrInstanceAlreadyExists
	}
	op, ok, err := b.latestOperation(ctx, existing.InstanceID, instance.TypeProvision)
	if err != nil || !ok {
		return domain.ProvisionedServiceSpec{}, internal(log, actionProvision, fmt.Errorf("finding the provisioning of %s: %w", existing.InstanceID, err))
	}
	if op.State == storage.StateSucceeded {
		return domain.ProvisionedServiceSpec{AlreadyExists: true, DashboardURL: existing.DashboardURL}, nil
	}
	// In progress, or failed: last_operation tells the platform which.
	return domain.ProvisionedServiceSpec{IsAsync: true, OperationData: op.ID}, nil
}

// cfContext adds Cloud Foundry's body fields to the context when the platform sent them
// only in the body (cf create-service sends organization_guid and space_guid there).
func cfContext(d domain.ProvisionDetails) json.RawMessage {
	if d.OrganizationGUID == "" && d.SpaceGUID == "" {
		return d.RawContext
	}
	ctx := map[string]any{}
	if len(d.RawContext) > 0 {
		if err := json.Unmarshal(d.RawContext, &ctx); err != nil {
			return d.RawContext // the catalog reports the malformed context
		}
	}
	if ctx == nil { // "context": null
		ctx = map[string]any{}
	}
	if _, ok := ctx["organization_guid"]; !ok && d.OrganizationGUID != "" {
		ctx["organization_guid"] = d.OrganizationGUID
	}
	if _, ok := ctx["space_guid"]; !ok && d.SpaceGUID != "" {
		ctx["space_guid"] = d.SpaceGUID
	}
	out, err := json.Marshal(ctx)
	if err != nil {
		return d.RawContext
	}
	return out
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
