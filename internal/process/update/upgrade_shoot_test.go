package update

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func intp(i int) *int { return &i }

func runUpgrade(e *env, op Op) (Op, time.Duration, error) {
	return steptest.Run(context.Background(), UpgradeShoot{e.deps}, op, t0)
}

func shootAccepted(opID string) func(string, string, gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	return func(string, string, gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
		return opStatus(opID, gqlschema.OperationStateInProgress), nil
	}
}

func TestUpgradeShoot_Name(t *testing.T) {
	assert.Equal(t, "Upgrade_Shoot", UpgradeShoot{}.Name())
}

func TestUpgradeShoot_FirstRunRequestsTheUpgrade(t *testing.T) {
	e := newEnv(t)
	e.prov.upgradeShoot = shootAccepted("pop-1")
	before := getInstance(t, e.store)

	out, wait, err := runUpgrade(e, newOp(updateData()))
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, wait, "rerun shortly, once the ID is persisted")
	assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID)

	calls := e.prov.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "UpgradeShoot", calls[0].Method)
	assert.Equal(t, testGA, calls[0].Tenant)
	assert.Equal(t, "rt-1", calls[0].ID)
	assert.Equal(t, gqlschema.UpgradeShootInput{
		GardenerConfig: &gqlschema.GardenerUpgradeInput{MachineType: strp("m6i.xlarge"), AutoScalerMin: intp(4), AutoScalerMax: intp(8)},
		Administrators: []string{"admin@example.com", "ops@example.com"},
	}, *calls[0].Shoot)

	assert.Equal(t, before.Version, getInstance(t, e.store).Version, "Upgrade_Shoot does not write the instance")
}

func TestUpgradeShoot_MapsParameters(t *testing.T) {
	for name, tc := range map[string]struct {
		params instance.Parameters
		want   gqlschema.UpgradeShootInput
	}{
		"nothing set": {
			params: instance.Parameters{Name: "c1"},
			want:   gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{}},
		},
		"machine type only": {
			params: instance.Parameters{Name: "c1", MachineType: "n2-standard-8"},
			want:   gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{MachineType: strp("n2-standard-8")}},
		},
		"autoscaler only": {
			params: instance.Parameters{Name: "c1", AutoScalerMin: 2, AutoScalerMax: 20},
			want:   gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{AutoScalerMin: intp(2), AutoScalerMax: intp(20)}},
		},
		"OIDC with every field": {
			params: instance.Parameters{Name: "c1", OIDC: &instance.OIDC{
				ClientID: "client", IssuerURL: "https://issuer.example", GroupsClaim: "groups",
				UsernameClaim: "email", UsernamePrefix: "oidc:", SigningAlgs: []string{"RS256"},
			}},
			want: gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{OidcConfig: &gqlschema.OIDCConfigInput{
				ClientID: "client", IssuerURL: "https://issuer.example", GroupsClaim: strp("groups"),
				UsernameClaim: strp("email"), UsernamePrefix: strp("oidc:"), SigningAlgs: []string{"RS256"},
			}}},
		},
		"OIDC with the required fields": {
			params: instance.Parameters{Name: "c1", OIDC: &instance.OIDC{ClientID: "client", IssuerURL: "https://issuer.example"}},
			want: gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{OidcConfig: &gqlschema.OIDCConfigInput{
				ClientID: "client", IssuerURL: "https://issuer.example",
			}}},
		},
		"administrators": {
			params: instance.Parameters{Name: "c1", Administrators: []string{"a@example.com"}},
			want:   gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{}, Administrators: []string{"a@example.com"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.upgradeShoot = shootAccepted("pop-1")
			data := updateData()
			data.Parameters = tc.params
			_, _, err := runUpgrade(e, newOp(data))
			require.NoError(t, err)
			calls := e.prov.Calls()
			require.Len(t, calls, 1)
			assert.Equal(t, tc.want, *calls[0].Shoot)
		})
	}
}

func TestUpgradeShoot_PollsThenSucceeds(t *testing.T) {
	e := newEnv(t)
	state := gqlschema.OperationStateInProgress
	e.prov.status = func(string, string) (*gqlschema.OperationStatus, error) { return opStatus("pop-1", state), nil }
	data := updateData()
	data.ProvisionerOperationID = "pop-1"

	out, wait, err := runUpgrade(e, newOp(data))
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)

	state = gqlschema.OperationStateSucceeded
	out.LastError = "reading the provisioner's operation: timeout"
	out, wait, err = runUpgrade(e, out)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, []provCall{
		{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"},
		{Method: "RuntimeOperationStatus", Tenant: testGA, ID: "pop-1"},
	}, e.prov.Calls(), "the upgrade is requested only once")
}

func TestUpgradeShoot_TransientErrorsPoll(t *testing.T) {
	t.Run("requesting", func(t *testing.T) {
		for name, provErr := range map[string]error{
			"internal": errors.New("connection refused"),
			"conflict": apperr.Conflict("operation pop-0 in progress"),
		} {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				e.prov.upgradeShoot = func(string, string, gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
					return nil, provErr
				}
				out, wait, err := runUpgrade(e, newOp(updateData()))
				require.NoError(t, err)
				assert.Equal(t, testPoll, wait)
				assert.Equal(t, "calling the provisioner: "+provErr.Error(), out.LastError)
				assert.Empty(t, out.Data.ProvisionerOperationID)
			})
		}
	})
	t.Run("polling", func(t *testing.T) {
		e := newEnv(t)
		e.prov.status = steptest.StatusReturning(nil, errors.New("timeout"))
		data := updateData()
		data.ProvisionerOperationID = "pop-1"
		out, wait, err := runUpgrade(e, newOp(data))
		require.NoError(t, err)
		assert.Equal(t, testPoll, wait)
		assert.Equal(t, "reading the provisioner's operation: timeout", out.LastError)
		assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID)
	})
}

func TestUpgradeShoot_BadRequestFails(t *testing.T) {
	e := newEnv(t)
	e.prov.upgradeShoot = func(string, string, gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
		return nil, apperr.BadRequest("config.gardenerConfig.autoScalerMax", "must be at least autoScalerMin")
	}
	out, wait, err := runUpgrade(e, newOp(updateData()))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "the provisioner rejected the update")
	assert.Contains(t, err.Error(), "config.gardenerConfig.autoScalerMax: must be at least autoScalerMin")
	assert.Equal(t, apperr.CodeBadRequest, apperr.CodeOf(err))
	assert.Empty(t, out.Data.ProvisionerOperationID)
	assert.Len(t, e.prov.Calls(), 1)
}

func TestUpgradeShoot_ProvisionerFailureFails(t *testing.T) {
	e := newEnv(t)
	st := opStatus("pop-1", gqlschema.OperationStateFailed)
	st.Message = strp("machine type m6i.xlarge is not available in eu-central-1")
	e.prov.status = steptest.StatusReturning(st, nil)
	data := updateData()
	data.ProvisionerOperationID = "pop-1"

	_, wait, err := runUpgrade(e, newOp(data))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "provisioner operation pop-1 failed")
	assert.Contains(t, err.Error(), "machine type m6i.xlarge is not available in eu-central-1")
}
