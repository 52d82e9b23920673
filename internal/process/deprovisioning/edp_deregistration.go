package deprovisioning

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// EDPDeregistration removes the runtime's subaccount entries from the Event Data Platform.
type EDPDeregistration struct{ Deps }

func (EDPDeregistration) Name() string { return "EDP_Deregistration" }

func (s EDPDeregistration) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	if res.EDPSubAccountID == "" {
		return op, 0, nil
	}
	if err := s.Systems.EDP.DeregisterRuntime(ctx, res.EDPSubAccountID); err != nil {
		return op, s.Systems.Cleanup(&op, "EDP", "deregistering the runtime", err, s.PollInterval), nil
	}
	res.EDPSubAccountID, op.LastError = "", ""
	return op, 0, nil
}
