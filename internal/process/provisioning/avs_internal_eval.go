package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/sirupsen/logrus"
)

// AVSInternalEval sets up the internal monitoring of the runtime: an AVS evaluation under the
// configured parent, named after the instance so a retry finds it instead of creating another.
type AVSInternalEval struct{ Deps }

func (AVSInternalEval) Name() string { return "AVS_Create_Internal_Eval_Step" }

// InternalEvaluationName is the name of an instance's internal AVS evaluation.
func InternalEvaluationName(instanceID string) string { return "kyma-internal-" + instanceID }

// ExternalEvaluationName is the name of an instance's external AVS evaluation.
func ExternalEvaluationName(instanceID string) string { return "kyma-external-" + instanceID }

func (s AVSInternalEval) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.Resources.AVSInternalEvaluationID != 0 {
		return op, 0, nil
	}
	set := s.Systems.AVSSettings
	ev, err := s.Systems.AVS.CreateEvaluation(ctx, &avs.EvaluationRequest{
		Name:           InternalEvaluationName(op.InstanceID),
		Description:    fmt.Sprintf("Internal monitoring of the Kyma runtime of instance %s (%s, global account %s)", op.InstanceID, op.Data.PlanName, op.Data.Context.GlobalAccountID),
		DefinitionType: "BASIC", CheckType: "HTTPSGET", Interval: 180, Timeout: 30000, Threshold: 30000,
		URL:            fmt.Sprintf("%s/?kubeconfigID=%s", s.Defaults.DashboardURL, op.InstanceID),
		TesterAccessID: set.InternalTesterAccessID, GroupID: set.GroupID, ParentID: set.ParentID, Visibility: "PUBLIC",
		// The instance's tag is known now: AVS_Tags then adds only what the runtime brings.
		Tags: []avs.Tag{InstanceIDTag(set, op.InstanceID)},
	})
	if err != nil {
		wait, err := s.Systems.Retry(&op, "AVS", "creating the internal evaluation", err, s.PollInterval)
		return op, wait, err
	}
	op.Data.Resources.AVSInternalEvaluationID, op.LastError = ev.ID, ""
	log.WithField("evaluation_id", ev.ID).Info("AVS internal evaluation created")
	return op, 0, nil
}
