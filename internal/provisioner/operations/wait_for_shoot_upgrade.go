package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// WaitForShootUpgrade waits until the backend reconciled the new configuration, then records
// it as the runtime's configuration.
type WaitForShootUpgrade struct{ Deps }

func (WaitForShootUpgrade) Name() string { return "Wait_For_Shoot_Upgrade" }

func (s WaitForShootUpgrade) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	b, err := s.backend(op)
	if err != nil {
		return op, 0, err
	}
	st, err := b.Status(ctx, spec(&op, requestUpdate))
	if err != nil {
		return s.waitFor(op, fmt.Sprintf("reading cluster status: %v", err))
	}
	if st.Phase == infrastructure.PhaseFailed {
		return op, 0, fmt.Errorf("cluster upgrade failed: %s", st.Reason)
	}
	if st.Phase != infrastructure.PhaseSucceeded || st.ObservedRevision < op.Data.TargetRevision {
		return s.waitFor(op, "waiting for the cluster upgrade")
	}
	if err := s.storeConfig(ctx, op); err != nil {
		return s.waitFor(op, err.Error())
	}
	return op, 0, nil
}

// storeConfig makes the operation's configuration the runtime's.
func (d Deps) storeConfig(ctx context.Context, op Op) error {
	raw, err := json.Marshal(op.Data.Config)
	if err != nil {
		return fmt.Errorf("encoding runtime configuration: %w", err)
	}
	if err := d.updateRuntime(ctx, op.Data.RuntimeID, func(rt *storage.Runtime) error {
		rt.Config = raw
		return nil
	}); err != nil {
		return fmt.Errorf("storing runtime configuration: %w", err)
	}
	return nil
}
