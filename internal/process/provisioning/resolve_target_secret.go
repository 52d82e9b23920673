package provisioning

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"
)

// ResolveTargetSecret picks the hyperscaler account (the Gardener binding) the runtime's cluster
// is created with from the account pool: the global account's own one (claimed the first time),
// or a shared one for shared plans (trial). A pool with nothing to give is retried like a
// failing system: an operator may add accounts meanwhile.
type ResolveTargetSecret struct{ Deps }

func (ResolveTargetSecret) Name() string { return "Resolve_Target_Secret" }

func (s ResolveTargetSecret) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.TargetSecret != "" {
		return op, 0, nil
	}
	pool := s.Systems.AccountPool
	if pool == nil {
		return op, 0, errors.New("hyperscaler account pool: none configured")
	}
	d := op.Data
	req := s.Systems.AccountRules.Request(d.Provider, d.PlanName, d.PlatformRegion, d.Parameters.Region, d.Context.GlobalAccountID)
	secret, err := pool.Resolve(ctx, req)
	if err != nil {
		wait, err := s.Systems.Retry(&op, "hyperscaler account pool", "resolving the "+req.String(), err, s.PollInterval)
		return op, wait, err
	}
	op.Data.TargetSecret = secret
	op.LastError = ""
	log.WithFields(logrus.Fields{"target_secret": secret, "hyperscaler_type": req.Key(), "shared": req.Shared, "eu_access": req.EUAccess}).
		Info("hyperscaler account resolved")
	return op, 0, nil
}
