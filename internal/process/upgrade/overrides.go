package upgrade

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// Overrides applies the configured default overrides again: configuration may have changed since
// the runtime was provisioned, and the new Kyma version gets the current defaults.
type Overrides struct{ Deps }

func (Overrides) Name() string { return "Overrides_From_Secrets_And_Config_Step" }

func (s Overrides) Run(_ context.Context, op KymaOp, _ logrus.FieldLogger) (KymaOp, time.Duration, error) {
	s.Deps.Overrides.Apply(&op.Data.Overrides, &op.Secrets, op.Data.PlanName)
	return op, 0, nil
}
