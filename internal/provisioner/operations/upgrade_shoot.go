package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// UpgradeShoot applies the new cluster configuration and remembers the revision to wait for.
type UpgradeShoot struct{ Deps }

func (UpgradeShoot) Name() string { return "Upgrade_Shoot" }

func (s UpgradeShoot) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	rev, err := b.Update(ctx, spec(&op, requestUpdate))
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("updating cluster: %v", err))
	}
	op.Data.TargetRevision = rev
	return op, 0, nil
}
