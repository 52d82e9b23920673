package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/sirupsen/logrus"
)

// Initialization starts the provisioning: it builds, once, the runtime the provisioner will
// be asked for, from the plan, the parameters and the defaults. The account secret and the Kyma
// configuration are added by later steps (Resolve_Target_Secret, Create_Runtime).
type Initialization struct{ Deps }

func (Initialization) Name() string { return "Initialization" }

// IdempotencyLabel lets the provisioner recognise a repeated request for the same instance.
const IdempotencyLabel = "kyma-project.io/idempotency-key"

func (s Initialization) Run(_ context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.RuntimeInput != nil {
		return op, 0, nil
	}
	in, err := s.runtimeInput(op)
	if err != nil {
		return op, 0, fmt.Errorf("preparing the runtime request: %w", err)
	}
	op.Data.RuntimeInput = &in
	op.Data.KymaVersion = s.kymaVersion(op)
	op.Description = "provisioning the runtime"
	return op, 0, nil
}

func (s Initialization) runtimeInput(op Op) (gqlschema.ProvisionRuntimeInput, error) {
	d, p := op.Data, op.Data.Parameters
	nodes := "10.250.0.0/16"
	if p.Networking != nil && p.Networking.Nodes != "" {
		nodes = p.Networking.Nodes
	}
	provider, err := providerConfig(d.Provider, p.Region, nodes)
	if err != nil {
		return gqlschema.ProvisionRuntimeInput{}, err
	}
	return gqlschema.ProvisionRuntimeInput{
		RuntimeInput: &gqlschema.RuntimeInput{
			Name: p.Name,
			Labels: gqlschema.Labels{
				"broker_instance_id": op.InstanceID, "global_subaccount_id": d.Context.SubAccountID,
				"globalaccount": d.Context.GlobalAccountID, "subaccount": d.Context.SubAccountID,
				// Per operation: a replay after a crash gets the same runtime, a resumed (suspended)
				// trial gets a new one.
				IdempotencyLabel: op.ID,
			},
		},
		ClusterConfig: &gqlschema.ClusterConfigInput{
			Administrators: p.Administrators,
			GardenerConfig: &gqlschema.GardenerConfigInput{
				KubernetesVersion: s.Defaults.KubernetesVersion, Provider: d.Provider, Region: p.Region,
				MachineType: p.MachineType, WorkerCidr: nodes,
				AutoScalerMin: p.AutoScalerMin, AutoScalerMax: p.AutoScalerMax, MaxSurge: 1, MaxUnavailable: 0,
				ProviderSpecificConfig: provider, OidcConfig: oidc(p.OIDC),
			},
		},
	}, nil
}

func (s Initialization) kymaVersion(op Op) string {
	if v := op.Data.Parameters.KymaVersion; v != "" {
		return v
	}
	return s.Defaults.KymaVersion
}

func oidc(o *instance.OIDC) *gqlschema.OIDCConfigInput {
	if o == nil {
		return nil
	}
	in := &gqlschema.OIDCConfigInput{ClientID: o.ClientID, IssuerURL: o.IssuerURL, SigningAlgs: o.SigningAlgs}
	for dst, v := range map[**string]string{&in.GroupsClaim: o.GroupsClaim, &in.UsernameClaim: o.UsernameClaim, &in.UsernamePrefix: o.UsernamePrefix} {
		if v != "" {
			v := v
			*dst = &v
		}
	}
	return in
}
