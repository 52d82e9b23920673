package deprovisioning

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// DeprovisionAVS removes the runtime's external and internal AVS evaluations.
type DeprovisionAVS struct{ Deps }

func (DeprovisionAVS) Name() string { return "De-provision_AVS_Evaluations" }

func (s DeprovisionAVS) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	for _, id := range []*int64{&res.AVSExternalEvaluationID, &res.AVSInternalEvaluationID} {
		if *id == 0 {
			continue
		}
		if err := s.Systems.AVS.DeleteEvaluation(ctx, *id); err != nil {
			return op, s.Systems.Cleanup(&op, "AVS", "deleting evaluations", err, s.PollInterval), nil
		}
		*id = 0
	}
	op.LastError = ""
	return op, 0, nil
}
