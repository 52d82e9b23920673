package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// CreateRuntime asks the provisioner for the runtime. The operation ID is the request's
// idempotency key, so a repeat after a crash gets the same runtime back.
type CreateRuntime struct {
	Deps
	// RetryTime bounds retries of transient provisioner errors.
	RetryTime time.Duration
}

func (CreateRuntime) Name() string { return "Create_Runtime" }

func (s CreateRuntime) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.ProvisionerOperationID == "" {
		in, err := s.request(op)
		if err != nil {
			return op, 0, fmt.Errorf("preparing the runtime request: %w", err)
		}
		st, err := s.Provisioner.ProvisionRuntime(ctx, op.Data.Context.GlobalAccountID, in)
		if err != nil {
			if apperr.CodeOf(err) == apperr.CodeBadRequest {
				return op, 0, fmt.Errorf("the provisioner rejected the runtime: %w", err)
			}
			return op.RetryOperation(fmt.Sprintf("calling the provisioner: %v", err), s.PollInterval, s.RetryTime)
		}
		op.Data.RuntimeID, op.Data.ProvisionerOperationID = *st.RuntimeID, *st.ID
		log.WithField("runtime_id", op.Data.RuntimeID).Info("runtime requested")
	}
	// Also on a rerun after the request was accepted: the previous run may have failed to store
	// the runtime ID, and without it deprovisioning would not remove the runtime.
	if _, err := storage.ModifyInstance(ctx, s.Instances, op.InstanceID, func(i *storage.Instance) { i.RuntimeID = op.Data.RuntimeID }); err != nil {
		return op.RetryOperation(fmt.Sprintf("storing the runtime ID: %v", err), s.PollInterval, s.RetryTime)
	}
	op.LastError = ""
	return op, 0, nil
}

// request completes the runtime Initialization prepared with the account secret and, unless the
// reconciler installs Kyma (2.x), the Kyma configuration with the collected overrides. It is
// built on every call and never stored: it holds the overrides' secret values.
func (s CreateRuntime) request(op Op) (gqlschema.ProvisionRuntimeInput, error) {
	in := *op.Data.RuntimeInput
	if in.ClusterConfig != nil && in.ClusterConfig.GardenerConfig != nil {
		cluster := *in.ClusterConfig
		gardener := *cluster.GardenerConfig
		gardener.TargetSecret = op.Data.TargetSecret
		cluster.GardenerConfig = &gardener
		in.ClusterConfig = &cluster
	}
	if Kyma2(op.Data.KymaVersion) && s.Systems.Reconciler != nil {
		return in, nil
	}
	resolved, err := op.Data.Overrides.Resolve(op.Secrets)
	if err != nil {
		return in, err
	}
	in.KymaConfig = KymaConfigInput(op.Data.KymaVersion, s.Defaults.Components, resolved)
	return in, nil
}

// KymaConfigInput is the provisioner's Kyma configuration: the components, each with its
// overrides, and the global overrides.
func KymaConfigInput(version string, components []string, o overrides.Overrides) *gqlschema.KymaConfigInput {
	entries := func(es []overrides.Entry) []*gqlschema.ConfigEntryInput {
		var out []*gqlschema.ConfigEntryInput
		for _, e := range es {
			ce := &gqlschema.ConfigEntryInput{Key: e.Key, Value: e.Value}
			if e.Secret {
				secret := true
				ce.Secret = &secret
			}
			out = append(out, ce)
		}
		return out
	}
	k := &gqlschema.KymaConfigInput{Version: version, Configuration: entries(o[overrides.Global])}
	for _, c := range o.Install(components) {
		k.Components = append(k.Components, &gqlschema.ComponentConfigurationInput{Component: c, Namespace: "kyma-system", Configuration: entries(o[c])})
	}
	return k
}
