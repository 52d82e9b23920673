package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/sirupsen/logrus"
)

// ResolveTargetSecret picks the hyperscaler account secret the runtime's cluster is created with,
// from the account pool by provider, the same for every runtime of a global account.
type ResolveTargetSecret struct{ Deps }

func (ResolveTargetSecret) Name() string { return "Resolve_Target_Secret" }

func (s ResolveTargetSecret) Run(_ context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.TargetSecret != "" {
		return op, 0, nil
	}
	secret, err := s.Systems.AccountPool.Resolve(hyperscaler.Type(op.Data.Provider), op.Data.Context.GlobalAccountID)
	if err != nil {
		return op, 0, fmt.Errorf("hyperscaler account pool: %w", err)
	}
	op.Data.TargetSecret = secret
	log.WithField("target_secret", secret).Info("hyperscaler account resolved")
	return op, 0, nil
}
