package upgrade

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/sirupsen/logrus"
)

// ProvisionEMS gives an upgraded runtime Enterprise Messaging when it has none yet (runtimes moving
// off Kyma 1.x's Azure Event Hubs).
type ProvisionEMS struct{ Deps }

func (ProvisionEMS) Name() string { return "Provision EMS" }

func (s ProvisionEMS) Run(ctx context.Context, op KymaOp, log logrus.FieldLogger) (KymaOp, time.Duration, error) {
	if hasEMS(op) {
		// The runtime is bound already and its eventing credentials were copied from its
		// provisioning: binding again would leave one more live binding per upgrade.
		return op, 0, nil
	}
	wait, err := provisioning.EnsureEMS(ctx, s.Systems, &op, s.PollInterval, &op.Data.Resources, &op.Data.Overrides, &op.Secrets, provisioning.EMSName(op.ID), op.InstanceID, log)
	return op, wait, err
}

// hasEMS tells whether the runtime has a bound EMS whose credentials the overrides hold.
func hasEMS(op KymaOp) bool {
	if op.Data.Resources.EMSInstanceID == "" || op.Data.Resources.EMSBindingID == "" {
		return false
	}
	_, ok := op.Secrets[overrides.SecretKey(provisioning.EventingComponent, provisioning.EMSCredentialsKey)]
	return ok
}
