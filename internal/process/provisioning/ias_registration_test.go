package provisioning_test

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	sbias "github.com/kyma-project/kyma-environment-broker/internal/sandbox/ias"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func iasRegistrationStep(e *env) step { return provisioning.IASRegistration{Deps: e.deps} }

const spName = "kyma-runtime-" + testInstanceID

// serviceProvider returns the sandbox's only service provider named spName.
func serviceProvider(t *testing.T, objs sbias.Objects) sbias.Object {
	t.Helper()
	var found []sbias.Object
	for _, sp := range objs.ServiceProviders {
		if sp.Name == spName {
			found = append(found, sp)
		}
	}
	require.Len(t, found, 1, "service providers named %s", spName)
	return found[0]
}

// registerIAS runs IAS_Registration to the end: it registers the service provider, asks to run
// again at once (so that the ID is stored before a secret is generated), then generates the secret.
func registerIAS(t *testing.T, e *env, op Op) Op {
	t.Helper()
	out, wait, err := e.run(iasRegistrationStep(e), op, t0)
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, wait, "run again once the service provider's ID is stored")
	require.NotEmpty(t, out.Data.Resources.IASServiceProviderID)
	require.Empty(t, out.Data.Resources.IASClientID, "no secret generated yet")
	return e.mustRun(t, iasRegistrationStep(e), out, t0.Add(wait))
}

func TestIASRegistration_Name(t *testing.T) {
	assert.Equal(t, "IAS_Registration", provisioning.IASRegistration{}.Name())
}

func TestIASRegistration_RegistersAndGivesGrafanaTheClient(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := registerIAS(t, e, newOp(provData("azure", "westeurope")))

	sp := serviceProvider(t, objects[sbias.Objects](t, e, "ias"))
	assert.Equal(t, sp.ID, out.Data.Resources.IASServiceProviderID)
	assert.Equal(t, sp.ID, out.Data.Resources.IASClientID, "the OIDC client ID is the service provider's ID")
	assert.Equal(t, 1, sp.Secrets, "one client secret")
	assert.Empty(t, out.LastError)

	// Grafana gets the client ID in clear and the secret through the encrypted secrets.
	assert.Equal(t, []overrides.Entry{
		{Key: provisioning.GrafanaClientIDKey, Value: sp.ID},
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

	objs := objects[sbias.Objects](t, e, "ias")
	assert.Equal(t, 1, objs.CreatesByName[spName], "exactly one service provider")
	assert.Equal(t, 1, serviceProvider(t, objs).Secrets, "exactly one client secret")
}

// A crash after IAS generated a secret but before the operation kept it, and answers lost on the way,
// leave exactly one valid secret: the one Grafana gets.
func TestIASRegistration_OneSecretAfterCrashesAndLostAnswers(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{Seed: 11})
	op := newOp(provData("azure", "westeurope"))
	registered, _, err := e.run(iasRegistrationStep(e), op, t0)
	require.NoError(t, err)
	// the secret is generated twice whose outcome is lost (the process died before saving)
	for range 2 {
		lost := e.mustRun(t, iasRegistrationStep(e), registered, t0)
		require.NotEmpty(t, lost.Data.Resources.IASClientID)
	}
	e.sb.Faults(t, "ias", sandbox.Faults{LostResponseRate: 0.5})
	out := registered
	for i := 0; out.Data.Resources.IASClientID == ""; i++ {
		require.Less(t, i, 20, "IAS_Registration did not finish: %s", out.LastError)
		next, wait, err := e.run(iasRegistrationStep(e), out, t0.Add(time.Duration(i)*testPoll))
		require.NoError(t, err)
		if wait == 0 {
			out = next
			break
		}
		out = next
	}
	st, err := e.sb.Sandbox.Stats("ias")
	require.NoError(t, err)
	assert.Positive(t, st.LostResponses, "answers were lost")
	objs := objects[sbias.Objects](t, e, "ias")
	assert.Equal(t, 1, objs.CreatesByName[spName], "exactly one service provider")
	assert.Equal(t, 1, serviceProvider(t, objs).Secrets, "exactly one valid client secret")
	assert.NotEmpty(t, out.Secrets[overrides.SecretKey(provisioning.MonitoringComponent, provisioning.GrafanaClientSecretK)])
}

func TestIASRegistration_DownRetriesThenFails(t *testing.T) {
	t.Run("registering", func(t *testing.T) {
		e := newSystemsEnv(t, standins.Options{})
		out := e.downThenGiveUp(t, iasRegistrationStep(e), newOp(provData("azure", "westeurope")), "ias", "IAS")
		assert.Contains(t, out.LastError, "registering the service provider")
		assert.Empty(t, out.Data.Resources.IASServiceProviderID)
		assert.Empty(t, objects[sbias.Objects](t, e, "ias").ServiceProviders)
	})
	t.Run("generating the secret", func(t *testing.T) {
		e := newSystemsEnv(t, standins.Options{})
		registered, _, err := e.run(iasRegistrationStep(e), newOp(provData("azure", "westeurope")), t0)
		require.NoError(t, err)
		out := e.downThenGiveUp(t, iasRegistrationStep(e), registered, "ias", "IAS")
		assert.Contains(t, out.LastError, "generating the client secret")
		assert.Empty(t, out.Data.Resources.IASClientID)
		assert.Empty(t, out.Secrets)

		// Back within the window, the same service provider gets its secret.
		e.up(t, "ias")
		out = e.mustRun(t, iasRegistrationStep(e), out, t0.Add(testPoll))
		assert.Equal(t, registered.Data.Resources.IASServiceProviderID, out.Data.Resources.IASClientID)
		assert.Empty(t, out.LastError)
		assert.Equal(t, 1, serviceProvider(t, objects[sbias.Objects](t, e, "ias")).Secrets)
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
