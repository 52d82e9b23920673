package deprovisioning

import (
	"context"
	"errors"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/sirupsen/logrus"
)

// DeprovisionEMS unbinds and deprovisions the runtime's Enterprise Messaging instance through the
// Service Manager.
type DeprovisionEMS struct{ Deps }

func (DeprovisionEMS) Name() string { return "Deprovision EMS" }

const smSystem = "Service Manager (EMS)"

func (s DeprovisionEMS) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	if res.EMSInstanceID == "" {
		return op, 0, nil
	}
	creds, ok := s.Systems.SMCredentials(op.Secrets)
	if !ok {
		return op, s.Systems.Cleanup(&op, smSystem, "deprovisioning Enterprise Messaging", clientkit.Permanent(errors.New("no Service Manager credentials configured")), s.PollInterval), nil
	}
	if res.EMSBindingID != "" {
		if err := s.Systems.ServiceManager.Unbind(ctx, creds, res.EMSBindingID); err != nil {
			return op, s.Systems.Cleanup(&op, smSystem, "unbinding the EMS instance", err, s.PollInterval), nil
		}
		res.EMSBindingID = ""
	}
	if err := s.Systems.ServiceManager.DeprovisionInstance(ctx, creds, res.EMSInstanceID); err != nil {
		return op, s.Systems.Cleanup(&op, smSystem, "deprovisioning the EMS instance", err, s.PollInterval), nil
	}
	log.WithField("ems_instance_id", res.EMSInstanceID).Info("EMS instance deprovisioned")
	res.EMSInstanceID, op.LastError = "", ""
	return op, 0, nil
}
