package operations

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// UpdateUpgradeState records the upgraded Kyma configuration as the runtime's.
type UpdateUpgradeState struct{ Deps }

func (UpdateUpgradeState) Name() string { return "Update_Upgrade_State" }

func (s UpdateUpgradeState) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if err := s.storeConfig(ctx, op); err != nil {
		return s.waitFor(op, err.Error())
	}
	return op, 0, nil
}
