package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
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
		engine.Remember(op, requestedMemo, st)
	}
	// Also on a rerun after the request was accepted: the previous run may have failed to store
	// the runtime ID, and without it deprovisioning would not remove the runtime.
	// Kept on the instance before Check_Runtime waits: the provisioner wakes the operations of
	// the instance whose runtime it finished, and deprovisioning removes the instance's runtime.
	// One column, no read; nothing is written on a rerun that finds it stored.
	if err := s.Instances.SetInstanceFields(ctx, op.InstanceID, storage.InstanceFields{RuntimeID: &op.Data.RuntimeID}); err != nil {
		return op.RetryOperation(fmt.Sprintf("storing the runtime ID: %v", err), s.PollInterval, s.RetryTime)
	}
	// The request is with the provisioner now: not carried in the data of every later save
	// (~0.8 KB each). A rerun of this step finds the provisioner's operation ID and builds none.
	op.Data.RuntimeInput = nil
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
	if s.ReconcilerInstalls(op) {
		return in, nil
	}
	resolved, err := op.Data.Overrides.Resolve(op.Secrets)
	if err != nil {
		return in, err
	}
	in.KymaConfig = KymaConfigInput(op.Data.KymaVersion, s.Defaults.Components, op.Data.Parameters.Modules, resolved)
	return in, nil
}

// KymaConfigInput is the provisioner's Kyma configuration: the components (each installed as a
// Kyma module), each with its overrides, and the global overrides. modules is the instance's
// modules parameter: nil or default true gives the default components and every component with
// overrides; default false none; a list exactly the listed modules, their channel and custom
// resource policy in their configuration (module.ConfigKey*), which the provisioner writes into
// the Kyma resource's spec.modules.
func KymaConfigInput(version string, defaults []string, modules *instance.Modules, o overrides.Overrides) *gqlschema.KymaConfigInput {
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
	component := func(name string) *gqlschema.ComponentConfigurationInput {
		return &gqlschema.ComponentConfigurationInput{Component: name, Namespace: "kyma-system", Configuration: entries(o[name])}
	}
	switch {
	case modules == nil || (modules.Default != nil && *modules.Default):
		for _, c := range o.Install(defaults) {
			k.Components = append(k.Components, component(c))
		}
	case modules.Default != nil:
		// default: false, no modules.
	default:
		for _, m := range modules.List {
			c := component(m.Name)
			if m.Channel != "" {
				c.Configuration = append(c.Configuration, &gqlschema.ConfigEntryInput{Key: modulespec.ConfigKeyChannel, Value: m.Channel})
			}
			if m.CustomResourcePolicy != "" {
				c.Configuration = append(c.Configuration, &gqlschema.ConfigEntryInput{Key: modulespec.ConfigKeyCustomResourcePolicy, Value: m.CustomResourcePolicy})
			}
			k.Components = append(k.Components, c)
		}
	}
	return k
}
