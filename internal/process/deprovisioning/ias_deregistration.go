package deprovisioning

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// IASDeregistration removes the runtime's service provider from IAS.
type IASDeregistration struct{ Deps }

func (IASDeregistration) Name() string { return "IAS_Deregistration" }

func (s IASDeregistration) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	if res.IASServiceProviderID == "" {
		return op, 0, nil
	}
	if err := s.Systems.IAS.DeleteServiceProvider(ctx, res.IASServiceProviderID); err != nil {
		return op, s.Systems.Cleanup(&op, "IAS", "deleting the service provider", err, s.PollInterval), nil
	}
	res.IASServiceProviderID, res.IASClientID, op.LastError = "", "", ""
	return op, 0, nil
}
