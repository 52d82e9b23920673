package upgrade

import (
	"context"
	"errors"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/sirupsen/logrus"
)

// DeprovisionEventHubs removes Kyma 1.x's Azure Event Hubs namespace once the runtime moves to
// Kyma 2.x eventing, and drops the Kafka overrides that pointed at it.
type DeprovisionEventHubs struct{ Deps }

func (DeprovisionEventHubs) Name() string { return "Deprovision Azure Event Hubs" }

func (s DeprovisionEventHubs) Run(ctx context.Context, op KymaOp, log logrus.FieldLogger) (KymaOp, time.Duration, error) {
	res := &op.Data.Resources
	if res.EventHubResourceGroup == "" {
		return op, 0, nil
	}
	gone, err := s.Systems.EventHubs.DeleteResourceGroup(ctx, res.EventHubResourceGroup)
	if err == nil && !gone {
		err = errors.New("the resource group is still being deleted")
	}
	if err != nil {
		// Like deprovisioning: a leftover namespace costs money but must not block the upgrade.
		wait := s.Systems.Cleanup(&op, "Azure Event Hubs", "deleting the resource group", err, s.PollInterval)
		if wait == 0 {
			// Given up: the group stays recorded for deprovisioning, but Kyma 2.x must not get
			// the Kafka component.
			delete(op.Data.Overrides, provisioning.KafkaComponent)
		}
		return op, wait, nil
	}
	log.WithField("resource_group", res.EventHubResourceGroup).Info("Event Hubs resource group deleted")
	res.EventHubResourceGroup, res.EventHubNamespace, op.LastError = "", "", ""
	delete(op.Data.Overrides, provisioning.KafkaComponent)
	return op, 0, nil
}
