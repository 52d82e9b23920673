package update

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/sirupsen/logrus"
)

// UpgradeShoot applies the updated cluster parameters through the provisioner and waits.
type UpgradeShoot struct{ Deps }

func (UpgradeShoot) Name() string { return "Upgrade_Shoot" }

func (s UpgradeShoot) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	tenant := op.Data.GlobalAccountID
	if op.Data.ProvisionerOperationID == "" {
		st, err := s.Provisioner.UpgradeShoot(ctx, tenant, op.Data.RuntimeID, shootInput(op.Data))
		switch {
		case apperr.CodeOf(err) == apperr.CodeBadRequest:
			return op, 0, fmt.Errorf("the provisioner rejected the update: %w", err)
		case err != nil:
			op.LastError = fmt.Sprintf("calling the provisioner: %v", err)
			return op, s.PollInterval, nil
		}
		op.Data.ProvisionerOperationID = *st.ID
		return op, time.Millisecond, nil // persist the ID first
	}
	wait, err := systems.AwaitProvisioner(ctx, s.Provisioner, &op, tenant, op.Data.ProvisionerOperationID, s.PollInterval)
	return op, wait, err
}

func shootInput(d instanceUpdate) gqlschema.UpgradeShootInput {
	p := d.Parameters
	g := &gqlschema.GardenerUpgradeInput{}
	if p.MachineType != "" {
		g.MachineType = &p.MachineType
	}
	if p.AutoScalerMin > 0 {
		g.AutoScalerMin = &p.AutoScalerMin
	}
	if p.AutoScalerMax > 0 {
		g.AutoScalerMax = &p.AutoScalerMax
	}
	if p.OIDC != nil {
		// The provisioner replaces the whole OIDC config: send every field, as provisioning does.
		o := p.OIDC
		g.OidcConfig = &gqlschema.OIDCConfigInput{ClientID: o.ClientID, IssuerURL: o.IssuerURL, SigningAlgs: o.SigningAlgs}
		if o.GroupsClaim != "" {
			g.OidcConfig.GroupsClaim = &o.GroupsClaim
		}
		if o.UsernameClaim != "" {
			g.OidcConfig.UsernameClaim = &o.UsernameClaim
		}
		if o.UsernamePrefix != "" {
			g.OidcConfig.UsernamePrefix = &o.UsernamePrefix
		}
	}
	return gqlschema.UpgradeShootInput{GardenerConfig: g, Administrators: p.Administrators}
}
