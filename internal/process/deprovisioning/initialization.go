package deprovisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// Initialization waits until no other operation of the instance runs (a provisioning or an
// update still in progress finishes first), then reads the runtime to remove and what the
// instance's latest provisioning created in external systems.
type Initialization struct{ Deps }

func (Initialization) Name() string { return "Deprovision_Initialization" }

func (s Initialization) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	page, err := s.Operations.ListOperations(ctx, storage.OperationFilter{
		InstanceIDs: []string{op.InstanceID}, States: []storage.OperationState{storage.StatePending, storage.StateInProgress},
	})
	if err != nil {
		op.LastError = fmt.Sprintf("listing the instance's operations: %v", err)
		return op, s.PollInterval, nil
	}
	for _, other := range page.Items {
		if other.ID != op.ID && other.CreatedAt.Before(op.CreatedAt) {
			op.LastError = fmt.Sprintf("waiting for %s operation %s to finish", other.Type, other.ID)
			return op, s.PollInterval, nil
		}
	}
	inst, err := s.Instances.GetInstance(ctx, op.InstanceID)
	if err != nil {
		op.LastError = fmt.Sprintf("reading the instance: %v", err)
		return op, s.PollInterval, nil
	}
	if !op.Data.Initialized {
		prov, err := instance.LatestProvisioned(ctx, s.Operations, op.InstanceID)
		if err != nil {
			op.LastError = err.Error()
			return op, s.PollInterval, nil
		}
		op.Data.Resources, op.Data.Initialized = prov.Resources, true
		if c, ok := instance.SMCredentialsFrom(prov.Secrets); ok {
			c.Put(&op.Secrets) // Deprovision EMS removes the instance with the credentials that created it
		}
	}
	op.Data.RuntimeID, op.LastError = inst.RuntimeID, ""
	op.Description = "deprovisioning the runtime"
	return op, 0, nil
}
