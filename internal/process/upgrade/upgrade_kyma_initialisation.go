package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// KymaInitialisation fills the upgrade in from the instance and its latest provisioning (or
// upgrade): the runtime, the plan, the external resources and the overrides, whose secret values
// are copied into this operation's secrets.
type KymaInitialisation struct{ Deps }

func (KymaInitialisation) Name() string { return "Upgrade_Kyma_Initialisation" }

func (s KymaInitialisation) Run(ctx context.Context, op KymaOp, _ logrus.FieldLogger) (KymaOp, time.Duration, error) {
	if op.Data.Initialized {
		return op, 0, nil
	}
	inst, err := s.Instances.GetInstance(ctx, op.InstanceID)
	if err != nil {
		op.LastError = fmt.Sprintf("reading the instance: %v", err)
		return op, s.PollInterval, nil
	}
	if inst.RuntimeID == "" {
		return op, 0, fmt.Errorf("instance %s has no runtime to upgrade", op.InstanceID)
	}
	prov, err := instance.LatestProvisioned(ctx, s.Operations, op.InstanceID)
	if err != nil {
		op.LastError = err.Error()
		return op, s.PollInterval, nil
	}
	first, err := s.firstProvisioning(ctx, op.InstanceID)
	if err != nil {
		op.LastError = err.Error()
		return op, s.PollInterval, nil
	}
	d := &op.Data
	d.GlobalAccountID, d.SubAccountID, d.RuntimeID = inst.GlobalAccountID, inst.SubAccountID, inst.RuntimeID
	d.PlanID, d.PlanName, d.ServiceID, d.Provider = first.PlanID, first.PlanName, first.ServiceID, first.Provider
	d.Region, d.Name, d.ShootName = first.Parameters.Region, first.Parameters.Name, first.ShootName
	d.Administrators = first.Parameters.Administrators
	if len(d.Administrators) == 0 && first.Context.UserID != "" {
		d.Administrators = []string{first.Context.UserID}
	}
	// The modules as the instance has them now: an update may have changed them since provisioning.
	var current instance.Parameters
	if len(inst.Parameters) > 0 {
		if err := json.Unmarshal(inst.Parameters, &current); err != nil {
			return op, 0, fmt.Errorf("decoding the instance's parameters: %w", err)
		}
	}
	d.Modules = current.Modules
	d.ProvisioningOperationID, d.Resources = prov.OperationID, prov.Resources
	d.Overrides = nil
	if err := d.Overrides.Copy(&op.Secrets, prov.Overrides, prov.Secrets); err != nil {
		return op, 0, fmt.Errorf("copying the runtime's overrides: %w", err)
	}
	if c, ok := instance.SMCredentialsFrom(prov.Secrets); ok {
		c.Put(&op.Secrets)
	}
	d.Initialized, op.LastError = true, ""
	op.Description = "upgrading Kyma to " + d.KymaVersion
	return op, 0, nil
}

// firstProvisioning reads the newest provisioning: the plan and parameters the runtime has.
func (s KymaInitialisation) firstProvisioning(ctx context.Context, instanceID string) (instance.ProvisioningData, error) {
	page, err := s.Operations.ListOperations(ctx, storage.OperationFilter{
		InstanceIDs: []string{instanceID}, Types: []string{instance.TypeProvision}, States: []storage.OperationState{storage.StateSucceeded},
		Paging: storage.Paging{PageSize: 1, WithoutTotal: true},
	})
	if err != nil {
		return instance.ProvisioningData{}, fmt.Errorf("reading the instance's provisioning: %w", err)
	}
	if len(page.Items) == 0 {
		return instance.ProvisioningData{}, fmt.Errorf("instance %s has no succeeded provisioning", instanceID)
	}
	var d instance.ProvisioningData
	if err := json.Unmarshal(page.Items[0].Data, &d); err != nil {
		return d, fmt.Errorf("decoding provisioning operation %s: %w", page.Items[0].ID, err)
	}
	return d, nil
}
