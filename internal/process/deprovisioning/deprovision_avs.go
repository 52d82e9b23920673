package deprovisioning

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/sirupsen/logrus"
)

// DeprovisionAVS removes the runtime's external and internal AVS evaluations. AVS refuses to
// delete an evaluation its parent still holds, so each is first removed from its parent (as the
// original broker did); every call is idempotent, so a rerun after a crash repeats them safely.
type DeprovisionAVS struct{ Deps }

func (DeprovisionAVS) Name() string { return "De-provision_AVS_Evaluations" }

func (s DeprovisionAVS) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	for _, id := range []*int64{&res.AVSExternalEvaluationID, &res.AVSInternalEvaluationID} {
		if *id == 0 {
			continue
		}
		if err := s.deleteEvaluation(ctx, *id); err != nil {
			return op, s.Systems.Cleanup(&op, "AVS", "deleting evaluations", err, s.PollInterval), nil
		}
		*id = 0
	}
	op.LastError = ""
	return op, 0, nil
}

// deleteEvaluation unlinks the evaluation from the parent AVS says it has, then deletes it; a
// missing evaluation is done.
func (s DeprovisionAVS) deleteEvaluation(ctx context.Context, id int64) error {
	ev, err := s.Systems.AVS.GetEvaluation(ctx, id)
	switch {
	case systems.NotFound(err):
		return nil
	case err != nil:
		return err
	case ev.ParentID != 0:
		if err := s.Systems.AVS.RemoveParent(ctx, ev.ParentID, id); err != nil {
			return err
		}
	}
	return s.Systems.AVS.DeleteEvaluation(ctx, id)
}
