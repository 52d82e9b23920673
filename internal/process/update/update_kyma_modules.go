package update

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/sirupsen/logrus"
)

// UpdateKymaModules applies changed modules: the provisioner re-applies the runtime's Kyma
// configuration (same version, the overrides of the latest provisioning or upgrade) with the new
// modules, which become the Kyma resource's spec.modules. It runs before Update_Instance, so the
// instance still holds the old modules to compare with. Runtimes whose Kyma the provisioner does
// not install (Kyma 2.x through the reconciler) have no Kyma configuration there: nothing to apply.
type UpdateKymaModules struct{ Deps }

func (UpdateKymaModules) Name() string { return "Update_Kyma_Modules" }

func (s UpdateKymaModules) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	tenant := op.Data.GlobalAccountID
	if op.Data.ModulesOperationID == "" {
		in, skip, err := s.request(ctx, op)
		if err != nil {
			op.LastError = err.Error()
			return op, s.PollInterval, nil
		}
		if skip != "" {
			log.Info(skip)
			op.LastError = ""
			return op, 0, nil
		}
		st, err := s.Provisioner.UpgradeRuntime(ctx, tenant, op.Data.RuntimeID, in)
		switch {
		case apperr.CodeOf(err) == apperr.CodeBadRequest || apperr.CodeOf(err) == apperr.CodeNotFound:
			return op, 0, fmt.Errorf("the provisioner rejected the modules: %w", err)
		case err != nil:
			op.LastError = fmt.Sprintf("calling the provisioner: %v", err)
			return op, s.PollInterval, nil
		}
		op.Data.ModulesOperationID = *st.ID
		log.WithField("provisioner_operation_id", *st.ID).Info("modules update requested")
		return op, time.Millisecond, nil // persist the ID first
	}
	wait, err := systems.AwaitProvisioner(ctx, s.Provisioner, &op, tenant, op.Data.ModulesOperationID, s.PollInterval)
	return op, wait, err
}

// request builds the Kyma configuration with the new modules; skip says why there is nothing to
// apply.
func (s UpdateKymaModules) request(ctx context.Context, op Op) (gqlschema.UpgradeRuntimeInput, string, error) {
	inst, err := s.Instances.GetInstance(ctx, op.InstanceID)
	if err != nil {
		return gqlschema.UpgradeRuntimeInput{}, "", fmt.Errorf("reading the instance: %w", err)
	}
	var current instance.Parameters
	if len(inst.Parameters) > 0 {
		if err := json.Unmarshal(inst.Parameters, &current); err != nil {
			return gqlschema.UpgradeRuntimeInput{}, "", fmt.Errorf("decoding the instance's parameters: %w", err)
		}
	}
	if reflect.DeepEqual(current.Modules, op.Data.Parameters.Modules) {
		return gqlschema.UpgradeRuntimeInput{}, "modules unchanged", nil
	}
	rc, err := s.Provisioner.RuntimeConfiguration(ctx, op.Data.GlobalAccountID, op.Data.RuntimeID)
	if err != nil {
		return gqlschema.UpgradeRuntimeInput{}, "", fmt.Errorf("reading the runtime's configuration from the provisioner: %w", err)
	}
	if rc == nil || rc.KymaConfig == nil || rc.KymaConfig.Version == nil {
		return gqlschema.UpgradeRuntimeInput{}, "the provisioner does not install this runtime's Kyma: no modules to apply there", nil
	}
	prov, err := instance.LatestProvisioned(ctx, s.Operations, op.InstanceID)
	if err != nil {
		return gqlschema.UpgradeRuntimeInput{}, "", err
	}
	resolved, err := prov.Overrides.Resolve(prov.Secrets)
	if err != nil {
		return gqlschema.UpgradeRuntimeInput{}, "", fmt.Errorf("resolving the runtime's overrides: %w", err)
	}
	version := *rc.KymaConfig.Version
	return gqlschema.UpgradeRuntimeInput{
		KymaConfig: provisioning.KymaConfigInput(version, s.DefaultComponents, op.Data.Parameters.Modules, resolved),
	}, "", nil
}
