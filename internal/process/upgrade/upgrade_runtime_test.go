package upgrade

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const upgradeRuntimeStep = "Upgrade_Runtime"

func runUpgradeRuntime(e *env, op KymaOp, now time.Time) (KymaOp, time.Duration, error) {
	return steptest.Run(context.Background(), UpgradeRuntime{e.deps}, op, now)
}

func TestUpgradeRuntime_Name(t *testing.T) {
	assert.Equal(t, upgradeRuntimeStep, UpgradeRuntime{}.Name())
}

func TestUpgradeRuntime_RequestsTheUpgradeAndWaits(t *testing.T) {
	e := newEnv(t)
	e.prov.upgrade = accepting[gqlschema.UpgradeRuntimeInput]("pop-up")
	e.prov.status = statuses("pop-up", gqlschema.OperationStateInProgress, gqlschema.OperationStateSucceeded)
	op := e.initialized(t, "1.24.8")

	out, wait, err := runUpgradeRuntime(e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, wait, "requested: check at once")
	assert.Equal(t, "pop-up", out.Data.ProvisionerOperationID)

	calls := e.prov.CallsTo("UpgradeRuntime")
	require.Len(t, calls, 1)
	assert.Equal(t, testGA, calls[0].Tenant)
	assert.Equal(t, testRuntimeID, calls[0].ID)
	k := calls[0].Upgrade.KymaConfig
	require.NotNil(t, k)
	assert.Equal(t, "1.24.8", k.Version)
	assert.Equal(t, []*gqlschema.ConfigEntryInput{{Key: "global.domainName", Value: "c-1234567.kyma.local"}}, k.Configuration)
	var names []string
	for _, c := range k.Components {
		names = append(names, c.Component)
	}
	assert.Equal(t, []string{"istio", "serverless", "monitoring"}, names, "the default components, then those the overrides name")
	secret := true
	assert.Equal(t, []*gqlschema.ConfigEntryInput{
		{Key: "grafana.clientID", Value: "grafana-id"},
		{Key: "grafana.clientSecret", Value: grafanaSecret, Secret: &secret},
	}, k.Components[2].Configuration, "the provisioner gets the secret values")
	assert.NotContains(t, dataJSON(t, out.Data), grafanaSecret)

	out, wait, err = runUpgradeRuntime(e, out, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait, "in progress")

	out, wait, err = runUpgradeRuntime(e, out, t0.Add(testPoll))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, []string{"UpgradeRuntime", "RuntimeOperationStatus", "RuntimeOperationStatus"}, e.prov.methods())
	assert.Equal(t, "pop-up", e.prov.CallsTo("RuntimeOperationStatus")[0].ID)
}

func TestUpgradeRuntime_RequestsOnce(t *testing.T) {
	e := newEnv(t)
	e.prov.upgrade = accepting[gqlschema.UpgradeRuntimeInput]("pop-other")
	e.prov.status = statuses("pop-up", gqlschema.OperationStateSucceeded)
	op := e.initialized(t, "1.24.8")
	op.Data.ProvisionerOperationID = "pop-up"

	out, wait, err := runUpgradeRuntime(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "pop-up", out.Data.ProvisionerOperationID)
	assert.Equal(t, []string{"RuntimeOperationStatus"}, e.prov.methods(), "no second upgrade request")
}

func TestUpgradeRuntime_TemporaryErrorRetries(t *testing.T) {
	for name, provErr := range map[string]error{
		"internal": errors.New("connection refused"),
		"conflict": apperr.Conflict("another operation is in progress"),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.upgrade = func(string, string, gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
				return nil, provErr
			}
			op := e.initialized(t, "1.24.8")

			out, wait, err := runUpgradeRuntime(e, op, t0)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Contains(t, out.LastError, "calling the provisioner")
			assert.Contains(t, out.LastError, provErr.Error())
			assert.Empty(t, out.Data.ProvisionerOperationID)
		})
	}
}

func TestUpgradeRuntime_GivesUpAfterRetryTime(t *testing.T) {
	e := newEnv(t)
	e.prov.upgrade = func(string, string, gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
		return nil, errors.New("connection refused")
	}
	op := tryingSince(e.initialized(t, "1.24.8"), upgradeRuntimeStep, t0)

	_, wait, err := runUpgradeRuntime(e, op, t0.Add(testRetryTime-time.Second))
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)

	_, wait, err = runUpgradeRuntime(e, op, t0.Add(testRetryTime+time.Second))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "calling the provisioner: connection refused")
	assert.Contains(t, err.Error(), "step Upgrade_Runtime gave up after 1m0s")
}

func TestUpgradeRuntime_RejectedFailsAtOnce(t *testing.T) {
	for name, provErr := range map[string]error{
		"bad request": apperr.BadRequest("kymaConfig.version", "unknown version %q", "1.24.8"),
		"not found":   apperr.NotFound("runtime %s not found", testRuntimeID),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.upgrade = func(string, string, gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
				return nil, provErr
			}
			op := e.initialized(t, "1.24.8")

			out, wait, err := runUpgradeRuntime(e, op, t0)
			require.Error(t, err)
			assert.Zero(t, wait)
			assert.Contains(t, err.Error(), "the provisioner rejected the upgrade")
			assert.Equal(t, apperr.CodeOf(provErr), apperr.CodeOf(err), "the code survives wrapping")
			assert.Empty(t, out.Data.ProvisionerOperationID)
			assert.Len(t, e.prov.Calls(), 1)
		})
	}
}

func TestUpgradeRuntime_FailedUpgradeFails(t *testing.T) {
	e := newEnv(t)
	st := opStatus("pop-up", gqlschema.OperationStateFailed)
	st.LastError = &gqlschema.LastError{ErrMessage: "kyma installation timed out"}
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return st, nil }
	op := e.initialized(t, "1.24.8")
	op.Data.ProvisionerOperationID = "pop-up"

	_, wait, err := runUpgradeRuntime(e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "provisioner operation pop-up failed: kyma installation timed out")
}

func TestUpgradeRuntime_StatusErrorKeepsPolling(t *testing.T) {
	e := newEnv(t)
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return nil, errors.New("connection reset") }
	op := e.initialized(t, "1.24.8")
	op.Data.ProvisionerOperationID = "pop-up"

	out, wait, err := runUpgradeRuntime(e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Equal(t, "reading the provisioner's operation: connection reset", out.LastError)
	assert.Equal(t, "pop-up", out.Data.ProvisionerOperationID)
}

func TestUpgradeRuntime_MissingSecretValueFails(t *testing.T) {
	e := newEnv(t)
	e.prov.upgrade = accepting[gqlschema.UpgradeRuntimeInput]("pop-up")
	op := e.initialized(t, "1.24.8")
	op.Secrets = storage.Secrets{}

	_, wait, err := runUpgradeRuntime(e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "grafana.clientSecret")
	assert.Empty(t, e.prov.Calls(), "nothing is sent without the secret")
}

// A Kyma upgrade keeps the instance's modules as they are now (after updates), not the defaults.
func TestUpgradeRuntime_KeepsTheInstancesModules(t *testing.T) {
	e := newEnv(t)
	_, err := storage.ModifyInstance(context.Background(), e.store.Instances(), testInstanceID, func(i *storage.Instance) {
		i.Parameters = []byte(`{"name":"c1","modules":{"list":[{"name":"keda","channel":"fast"}]}}`)
	})
	require.NoError(t, err)
	e.prov.upgrade = accepting[gqlschema.UpgradeRuntimeInput]("pop-up")
	op := e.initialized(t, "1.24.8")
	assert.Equal(t, &instance.Modules{List: []instance.Module{{Name: "keda", Channel: "fast"}}}, op.Data.Modules)

	_, _, err = runUpgradeRuntime(e, op, t0)
	require.NoError(t, err)
	calls := e.prov.CallsTo("UpgradeRuntime")
	require.Len(t, calls, 1)
	assert.Equal(t, []*gqlschema.ComponentConfigurationInput{{Component: "keda", Namespace: "kyma-system",
		Configuration: []*gqlschema.ConfigEntryInput{{Key: modulespec.ConfigKeyChannel, Value: "fast"}}}}, calls[0].Upgrade.KymaConfig.Components)
}
