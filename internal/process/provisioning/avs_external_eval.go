package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/sirupsen/logrus"
)

// AVSExternalEval sets up the external monitoring of the runtime: an AVS evaluation of the
// runtime's dashboard as its users reach it, created once the runtime is ready.
type AVSExternalEval struct{ Deps }

func (AVSExternalEval) Name() string { return "AVS_Create_External_Eval_Step" }

func (s AVSExternalEval) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.Resources.AVSExternalEvaluationID != 0 {
		return op, 0, nil
	}
	// The dashboard URL Check_Runtime stored on the instance, from the run's memo when it ran
	// in this run.
	dashboard, err := engine.Memo(op, dashboardMemo, func() (string, error) {
		inst, err := s.Instances.GetInstance(ctx, op.InstanceID)
		return inst.DashboardURL, err
	})
	if err != nil {
		op.LastError = fmt.Sprintf("reading the instance: %v", err)
		return op, s.PollInterval, nil
	}
	ev, err := createEvaluation(ctx, s.Systems.AVS, &op, log, externalEvaluation(op, dashboard, s.Systems.AVSSettings.ExternalTesterAccessID))
	if err != nil {
		wait, err := s.Systems.Retry(&op, "AVS", "creating the external evaluation", err, s.PollInterval)
		return op, wait, err
	}
	op.Data.Resources.AVSExternalEvaluationID, op.LastError = ev.ID, ""
	log.WithField("evaluation_id", ev.ID).Info("AVS external evaluation created")
	return op, 0, nil
}

func externalEvaluation(op Op, dashboardURL string, testerAccessID int64) *avs.EvaluationRequest {
	return &avs.EvaluationRequest{
		Name:           ExternalEvaluationName(op.InstanceID),
		Description:    fmt.Sprintf("External monitoring of the Kyma runtime of instance %s (%s, global account %s)", op.InstanceID, op.Data.PlanName, op.Data.Context.GlobalAccountID),
		DefinitionType: "BASIC", CheckType: "HTTPSGET", Interval: 180, Timeout: 30000, Threshold: 30000,
		URL: dashboardURL, TesterAccessID: testerAccessID, Visibility: "PUBLIC",
	}
}
