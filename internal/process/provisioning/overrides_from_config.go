package provisioning

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// OverridesFromConfig gives the components the configured default overrides (resources/overrides.yaml
// or APP_OVERRIDES_FILE) for the instance's plan; entries from secrets are marked secret.
type OverridesFromConfig struct{ Deps }

func (OverridesFromConfig) Name() string { return "Overrides_From_Secrets_And_Config_Step" }

func (s OverridesFromConfig) Run(_ context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	// Entries set by earlier steps (credentials) win over configured defaults of the same key. The
	// defaults are collected aside, secret values included: collecting them into the operation's
	// secrets would overwrite the values of earlier steps' secret entries of the same key.
	var defaults overrides.Overrides
	var values storage.Secrets
	s.Overrides.Apply(&defaults, &values, op.Data.PlanName)
	resolved, err := defaults.Resolve(values)
	if err != nil {
		return op, 0, err
	}
	for _, c := range resolved.Components() {
		for _, e := range resolved[c] {
			if !op.Data.Overrides.Has(c, e.Key) {
				op.Data.Overrides.Set(&op.Secrets, c, e)
			}
		}
	}
	return op, 0, nil
}
