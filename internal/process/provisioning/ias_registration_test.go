package provisioning_test

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func iasRegistrationStep(e *env) step { return provisioning.IASRegistration{Deps: e.deps} }

const spName = "kyma-runtime-" + testInstanceID

// serviceProvider returns the sandbox's only service provider named spName.
func serviceProvider(t *testing.T, objs iasstandin.Objects) iasstandin.Object {
	t.Helper()
	var found []iasstandin.Object
	for _, sp := range objs.ServiceProviders {
		if sp.Name == spName {
			found = append(found, sp)
		}
	}
	require.Len(t, found, 1, "service providers named %s", spName)
	return found[0]
}

// registerIAS runs IAS_Registration to the end: one run registers the service provider and
// generates its secret.
func registerIAS(t *testing.T, e *env, op Op) Op {
	t.Helper()
	out := e.mustRun(t, iasRegistrationStep(e), op, t0)
	require.NotEmpty(t, out.Data.Resources.IASServiceProviderID)
	return out
}

// registeredOnly is op after an earlier run registered the service provider and failed to
// generate its secret (the ID is saved with the retry).
func registeredOnly(t *testing.T, e *env, op Op) Op {
	t.Helper()
	sp, err := e.sb.Systems.IAS.CreateServiceProvider(context.Background(), spName)
	require.NoError(t, err)
	op.Data.Resources.IASServiceProviderID = sp.ID
	return op
}

func TestIASRegistration_Name(t *testing.T) {
	assert.Equal(t, "IAS_Registration", provisioning.IASRegistration{}.Name())
}

func TestIASRegistration_RegistersAndGivesGrafanaTheClient(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := registerIAS(t, e, newOp(provData("azure", "westeurope")))

	sp := serviceProvider(t, objects[iasstandin.Objects](t, e, "ias"))
	assert.Equal(t, sp.ID, out.Data.Resources.IASServiceProviderID)
	assert.Equal(t, sp.UserForRest, out.Data.Resources.IASClientID, "the OIDC client ID is the service provider's userForRest")
	assert.Equal(t, 1, sp.Secrets, "one client secret")
	assert.Empty(t, out.LastError)

	// Grafana gets the client ID in clear and the secret through the encrypted secrets.
	assert.Equal(t, []overrides.Entry{
		{Key: provisioning.GrafanaClientIDKey, Value: sp.UserForRest},
		{Key: provisioning.GrafanaClientSecretK, Secret: true},
	}, out.Data.Overrides[provisioning.MonitoringComponent])
	secret := out.Secrets[overrides.SecretKey(provisioning.MonitoringComponent, provisioning.GrafanaClientSecretK)]
	require.NotEmpty(t, secret)
	assertNotInData(t, out, secret)
	resolved, err := out.Data.Overrides.Resolve(out.Secrets)
	require.NoError(t, err)
	assert.Equal(t, secret, resolved[provisioning.MonitoringComponent][1].Value)
}

func TestIASRegistration_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := newOp(provData("azure", "westeurope"))

	// The first run's result is lost: the rerun finds the service provider by name.
	lost, _, err := e.run(iasRegistrationStep(e), op, t0)
	require.NoError(t, err)
	out := registerIAS(t, e, op)
	assert.Equal(t, lost.Data.Resources.IASServiceProviderID, out.Data.Resources.IASServiceProviderID)

	// A rerun of the finished step generates no other secret.
	again := e.mustRun(t, iasRegistrationStep(e), out, t0.Add(testPoll))
	assert.Equal(t, out.Data, again.Data)
	assert.Equal(t, out.Secrets, again.Secrets)

	objs := objects[iasstandin.Objects](t, e, "ias")
	assert.Equal(t, 1, objs.CreatesByName[spName], "exactly one service provider")
	assert.Equal(t, 1, serviceProvider(t, objs).Secrets, "exactly one client secret")
}

// A registration costs the look-up by display name, the creation, the look-up that finds the
// created one (IAS answers a creation without its id) and the first secret: a service provider just
// created has no secret to revoke.
func TestIASRegistration_Requests(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	registerIAS(t, e, newOp(provData("azure", "westeurope")))
	st, err := e.sb.Sandbox.Stats("ias")
	require.NoError(t, err)
	assert.Equal(t, 4, st.Requests)
}

// A crash after IAS generated a secret but before the operation kept it, and answers lost on the way,
// leave exactly one valid secret: the one Grafana gets.
func TestIASRegistration_OneSecretAfterCrashesAndLostAnswers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(*testing.T, *env, Op) Op
	}{
		{"from the start", func(_ *testing.T, _ *env, op Op) Op { return op }},
		{"with the service provider's ID saved", registeredOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSystemsEnv(t, standins.Options{Seed: 11})
			op := tc.start(t, e, newOp(provData("azure", "westeurope")))
			// two runs whose outcome is lost (the process died before saving)
			for range 2 {
				lost := e.mustRun(t, iasRegistrationStep(e), op, t0)
				require.NotEmpty(t, lost.Data.Resources.IASClientID)
			}
			e.sb.Faults(t, "ias", sandbox.Faults{LostResponseRate: 0.5})
			out := op
			for i := 0; ; i++ {
				require.Less(t, i, 20, "IAS_Registration did not finish: %s", out.LastError)
				next, wait, err := e.run(iasRegistrationStep(e), out, t0.Add(time.Duration(i)*testPoll))
				require.NoError(t, err)
				out = next
				if wait == 0 {
					break
				}
			}
			require.NotEmpty(t, out.Data.Resources.IASClientID)
			st, err := e.sb.Sandbox.Stats("ias")
			require.NoError(t, err)
			assert.Positive(t, st.LostResponses, "answers were lost")
			objs := objects[iasstandin.Objects](t, e, "ias")
			assert.Equal(t, 1, objs.CreatesByName[spName], "exactly one service provider")
			assert.Equal(t, 1, serviceProvider(t, objs).Secrets, "exactly one valid client secret")
			assert.NotEmpty(t, out.Secrets[overrides.SecretKey(provisioning.MonitoringComponent, provisioning.GrafanaClientSecretK)])
		})
	}
}

// Answers lost in the run that creates the service provider leave one service provider with one
// valid secret.
func TestIASRegistration_LostAnswersInTheCreatingRun(t *testing.T) {
	lostAnswers := 0
	for seed := range uint64(8) {
		e := newSystemsEnv(t, standins.Options{Seed: seed})
		e.sb.Faults(t, "ias", sandbox.Faults{LostResponseRate: 0.3})
		out := newOp(provData("azure", "westeurope"))
		for i := 0; ; i++ {
			require.Less(t, i, 20, "IAS_Registration did not finish: %s", out.LastError)
			next, wait, err := e.run(iasRegistrationStep(e), out, t0)
			require.NoError(t, err)
			out = next
			if wait == 0 {
				break
			}
		}
		objs := objects[iasstandin.Objects](t, e, "ias")
		assert.Equal(t, 1, objs.CreatesByName[spName], "seed %d: exactly one service provider", seed)
		assert.Equal(t, 1, serviceProvider(t, objs).Secrets, "seed %d: exactly one valid client secret", seed)
		assert.Equal(t, serviceProvider(t, objs).UserForRest, out.Data.Resources.IASClientID)
		st, err := e.sb.Sandbox.Stats("ias")
		require.NoError(t, err)
		lostAnswers += st.LostResponses
	}
	assert.Greater(t, lostAnswers, 4, "answers were lost")
}

func TestIASRegistration_DownRetriesThenFails(t *testing.T) {
	t.Run("registering", func(t *testing.T) {
		e := newSystemsEnv(t, standins.Options{})
		out := e.downThenGiveUp(t, iasRegistrationStep(e), newOp(provData("azure", "westeurope")), "ias", "IAS")
		assert.Contains(t, out.LastError, "registering the service provider")
		assert.Empty(t, out.Data.Resources.IASServiceProviderID)
		assert.Empty(t, objects[iasstandin.Objects](t, e, "ias").ServiceProviders)
	})
	t.Run("generating the secret", func(t *testing.T) {
		e := newSystemsEnv(t, standins.Options{})
		registered := registeredOnly(t, e, newOp(provData("azure", "westeurope")))
		out := e.downThenGiveUp(t, iasRegistrationStep(e), registered, "ias", "IAS")
		assert.Contains(t, out.LastError, "generating the client secret")
		assert.Empty(t, out.Data.Resources.IASClientID)
		assert.Empty(t, out.Secrets)

		// Back within the window, the same service provider gets its secret.
		e.up(t, "ias")
		out = e.mustRun(t, iasRegistrationStep(e), out, t0.Add(testPoll))
		assert.Equal(t, serviceProvider(t, objects[iasstandin.Objects](t, e, "ias")).UserForRest, out.Data.Resources.IASClientID)
		assert.Empty(t, out.LastError)
		assert.Equal(t, 1, serviceProvider(t, objects[iasstandin.Objects](t, e, "ias")).Secrets)
	})
}

// Credentials IAS rejects are a configuration error: retrying cannot help.
func TestIASRegistration_RejectedCredentialsFail(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{Credentials: standins.Credentials{IASPassword: "rotated"}})
	out, wait, err := e.run(iasRegistrationStep(e), newOp(provData("azure", "westeurope")), t0)
	assertFailed(t, wait, err, "IAS", "IAS_Registration")
	assert.Contains(t, err.Error(), "401")
	assert.Empty(t, out.Data.Resources.IASServiceProviderID)
}
