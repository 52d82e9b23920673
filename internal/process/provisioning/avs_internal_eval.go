package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/sirupsen/logrus"
)

// AVSInternalEval sets up the internal monitoring of the runtime: an AVS evaluation under the
// configured parent, named after the instance. Its ID is kept in the operation, written before
// the next step runs; see createEvaluation for what a retry can and cannot know.
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
	ev, err := createEvaluation(ctx, s.Systems.AVS, &op, log, &avs.EvaluationRequest{
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

// createEvaluation creates an evaluation. AVS gives the ID and offers no look-up by name, so
// nothing can find an evaluation whose creation's answer was lost: the client sends the creation
// once per call unless AVS certainly refused it, and the step keeps the ID its answer carries (the
// engine writes it before any later step). When AVS may have created it without telling (a lost
// answer; a crash between AVS's answer and that write cannot be told apart from a creation that
// never happened), the name is recorded in the operation's resources and logged, for an operator
// to remove the extra evaluation, and the next run creates the evaluation again: monitoring a
// runtime twice is recoverable, not monitoring it is not.
func createEvaluation(ctx context.Context, sys systems.AVS, op *Op, log logrus.FieldLogger, req *avs.EvaluationRequest) (*avs.Evaluation, error) {
	ev, err := sys.CreateEvaluation(ctx, req)
	if avs.IsOutcomeUnknown(err) {
		op.Data.Resources.AVSUnconfirmed = append(op.Data.Resources.AVSUnconfirmed, req.Name)
		log.WithField("evaluation", req.Name).WithError(err).Warn("AVS may hold an evaluation the broker has no ID of")
	}
	return ev, err
}
