package update

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modulesEnv is an env whose runtime's Kyma the provisioner installs (version 1.24.8), provisioned
// with a secret override, and whose update asks for the modules keda (fast) and serverless.
func modulesEnv(t *testing.T) (*env, Op) {
	t.Helper()
	e := newEnv(t)
	e.deps.Operations, e.deps.DefaultComponents = e.store.Operations(), []string{"istio"}
	var secrets storage.Secrets
	var ov overrides.Overrides
	ov.Set(&secrets, "serverless", overrides.Entry{Key: "registry.password", Value: "s3cret", Secret: true})
	prov, err := engine.NewOperation(instance.TypeProvision, testInstanceID, instance.ProvisioningData{Overrides: ov}, time.Hour, t0.Add(-time.Hour))
	require.NoError(t, err)
	prov.State, prov.DueAt, prov.Secrets = storage.StateSucceeded, nil, secrets
	_, err = e.store.Operations().InsertOperation(context.Background(), prov)
	require.NoError(t, err)
	e.prov.RuntimeStatusFunc = func(string, string) (*gqlschema.RuntimeStatus, error) {
		v := "1.24.8"
		return &gqlschema.RuntimeStatus{RuntimeConfiguration: &gqlschema.RuntimeConfig{KymaConfig: &gqlschema.KymaConfig{Version: &v}}}, nil
	}
	d := updateData()
	d.Parameters.Modules = &instance.Modules{List: []instance.Module{{Name: "keda", Channel: "fast"}, {Name: "serverless"}}}
	return e, newOp(d)
}

func runModules(e *env, op Op) (Op, time.Duration, error) {
	return steptest.Run(context.Background(), UpdateKymaModules{e.deps}, op, t0)
}

func TestUpdateKymaModules_Name(t *testing.T) {
	assert.Equal(t, "Update_Kyma_Modules", UpdateKymaModules{}.Name())
}

func TestUpdateKymaModules_AppliesChangedModulesThroughTheProvisioner(t *testing.T) {
	e, op := modulesEnv(t)
	e.prov.UpgradeRuntimeFunc = func(string, string, gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
		return opStatus("pop-m", gqlschema.OperationStateInProgress), nil
	}
	out, wait, err := runModules(e, op)
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, wait, "rerun once the ID is persisted")
	assert.Equal(t, "pop-m", out.Data.ModulesOperationID)

	calls := e.prov.CallsTo("UpgradeRuntime")
	require.Len(t, calls, 1)
	assert.Equal(t, "rt-1", calls[0].ID)
	k := calls[0].Upgrade.KymaConfig
	assert.Equal(t, "1.24.8", k.Version, "the runtime's Kyma version stays")
	secret := true
	assert.Equal(t, []*gqlschema.ComponentConfigurationInput{
		{Component: "keda", Namespace: "kyma-system", Configuration: []*gqlschema.ConfigEntryInput{{Key: modulespec.ConfigKeyChannel, Value: "fast"}}},
		{Component: "serverless", Namespace: "kyma-system", Configuration: []*gqlschema.ConfigEntryInput{{Key: "registry.password", Value: "s3cret", Secret: &secret}}},
	}, k.Components, "exactly the new modules, with the provisioning's overrides")

	state := gqlschema.OperationStateInProgress
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return opStatus("pop-m", state), nil }
	out, wait, err = runModules(e, out)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	state = gqlschema.OperationStateSucceeded
	_, wait, err = runModules(e, out)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Len(t, e.prov.CallsTo("UpgradeRuntime"), 1, "requested once")
}

func TestUpdateKymaModules_NothingToApply(t *testing.T) {
	t.Run("unchanged", func(t *testing.T) {
		e, op := modulesEnv(t)
		op.Data.Parameters.Modules = nil
		_, wait, err := runModules(e, op)
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, e.prov.Calls())
	})
	t.Run("the reconciler installs Kyma", func(t *testing.T) {
		e, op := modulesEnv(t)
		e.prov.RuntimeStatusFunc = func(string, string) (*gqlschema.RuntimeStatus, error) {
			return &gqlschema.RuntimeStatus{RuntimeConfiguration: &gqlschema.RuntimeConfig{}}, nil
		}
		_, wait, err := runModules(e, op)
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, e.prov.CallsTo("UpgradeRuntime"))
	})
}

func TestUpdateKymaModules_Errors(t *testing.T) {
	t.Run("provisioner down: retry", func(t *testing.T) {
		e, op := modulesEnv(t)
		e.prov.UpgradeRuntimeFunc = func(string, string, gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
			return nil, errors.New("connection refused")
		}
		out, wait, err := runModules(e, op)
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Contains(t, out.LastError, "connection refused")
		assert.Empty(t, out.Data.ModulesOperationID)
	})
	t.Run("rejected: fail", func(t *testing.T) {
		e, op := modulesEnv(t)
		e.prov.UpgradeRuntimeFunc = func(string, string, gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
			return nil, apperr.BadRequest("config.kymaConfig", "nope")
		}
		_, _, err := runModules(e, op)
		assert.ErrorContains(t, err, "the provisioner rejected the modules")
	})
}
