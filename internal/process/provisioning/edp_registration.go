package provisioning

import (
	"context"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/edp"
	"github.com/sirupsen/logrus"
)

// EDPRegistration registers the runtime's subaccount with the Event Data Platform.
type EDPRegistration struct{ Deps }

func (EDPRegistration) Name() string { return "EDP_Registration" }

// EDP metadata keys of a runtime.
const (
	EDPEnvironmentKey = edp.MaasConsumerEnvironmentKey
	EDPRegionKey      = edp.MaasConsumerRegionKey
	EDPSubAccountKey  = edp.MaasConsumerSubAccountKey
	EDPServicePlanKey = edp.MaasConsumerServicePlanKey
)

func (s EDPRegistration) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.Resources.EDPSubAccountID != "" {
		return op, 0, nil
	}
	// EDP knows a subaccount by its lower-case id; deregistration uses the one kept here.
	sub := strings.ToLower(op.Data.Context.SubAccountID)
	err := s.Systems.EDP.RegisterRuntime(ctx, sub, map[string]string{
		EDPEnvironmentKey: edp.ConsumerEnvironment(op.Data.PlatformRegion), EDPRegionKey: op.Data.PlatformRegion,
		EDPSubAccountKey: sub, EDPServicePlanKey: edp.ConsumerServicePlan(op.Data.PlanName),
	})
	if err != nil {
		wait, err := s.Systems.Retry(&op, "EDP", "registering the runtime", err, s.PollInterval)
		return op, wait, err
	}
	op.Data.Resources.EDPSubAccountID, op.LastError = sub, ""
	log.WithField("subaccount_id", sub).Info("runtime registered in EDP")
	return op, 0, nil
}
