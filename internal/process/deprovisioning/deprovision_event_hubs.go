package deprovisioning

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// DeprovisionEventHubs deletes the resource group holding the runtime's Azure Event Hubs namespace
// and waits until it is gone.
type DeprovisionEventHubs struct{ Deps }

func (DeprovisionEventHubs) Name() string { return "Deprovision Azure Event Hubs" }

func (s DeprovisionEventHubs) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	if res.EventHubResourceGroup == "" {
		return op, 0, nil
	}
	gone, err := s.Systems.EventHubs.DeleteResourceGroup(ctx, res.EventHubResourceGroup)
	if err != nil {
		return op, s.Systems.Cleanup(&op, "Azure Event Hubs", "deleting the resource group", err, s.PollInterval), nil
	}
	if !gone {
		op.LastError = "Azure Event Hubs: waiting for the resource group to be deleted"
		return op, s.Systems.Cleanup(&op, "Azure Event Hubs", "deleting the resource group", errStillThere, s.PollInterval), nil
	}
	log.WithField("resource_group", res.EventHubResourceGroup).Info("Event Hubs resource group deleted")
	res.EventHubResourceGroup, res.EventHubNamespace, op.LastError = "", "", ""
	return op, 0, nil
}
