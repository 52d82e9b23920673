package provisioning_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/ias"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
)

func iasTypeStep(e *env) step { return provisioning.IASType{Deps: e.deps} }

// iasRegistered is a finished runtime registered in IAS by IAS_Registration.
func iasRegistered(t *testing.T, e *env) Op {
	t.Helper()
	return registerIAS(t, e, ready())
}

func TestIASType_Name(t *testing.T) {
	assert.Equal(t, "IAS_Type", provisioning.IASType{}.Name())
}

func TestGrafanaRedirectURI(t *testing.T) {
	assert.Equal(t, "https://grafana.c-1.kyma.example/login/generic_oauth", provisioning.GrafanaRedirectURI("c-1.kyma.example", "https://dash.example"))
	assert.Equal(t, "https://grafana.dash.example/login/generic_oauth", provisioning.GrafanaRedirectURI("", "https://dash.example"),
		"without a domain the dashboard's host stands in")
}

func TestIASType_MakesItAnOIDCApplication(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := iasRegistered(t, e)
	out := e.mustRun(t, iasTypeStep(e), op, t0)
	assert.True(t, out.Data.Resources.IASOIDCConfigured)
	assert.Empty(t, out.LastError)

	sp := serviceProvider(t, objects[iasstandin.Objects](t, e, "ias"))
	assert.Equal(t, ias.SSOTypeOpenIDConnect, sp.SSOType)
	assert.Equal(t, []string{"https://grafana.c-1a2b3c.kyma.example/login/generic_oauth"}, sp.RedirectURIs)
	assert.Equal(t, ias.SubjectNameIdentifier, sp.NameIDAttribute)
	assert.Equal(t, 1, sp.Secrets, "the client secret is kept")
}

func TestIASType_SkippedWithoutServiceProvider(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.mustRun(t, iasTypeStep(e), ready(), t0)
	assert.False(t, out.Data.Resources.IASOIDCConfigured)
	assert.Empty(t, objects[iasstandin.Objects](t, e, "ias").Calls, "IAS is not called")
}

func TestIASType_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := iasRegistered(t, e)
	e.mustRun(t, iasTypeStep(e), op, t0)
	out := e.mustRun(t, iasTypeStep(e), op, t0.Add(testPoll)) // lost result: configured again
	before := objects[iasstandin.Objects](t, e, "ias")
	e.mustRun(t, iasTypeStep(e), out, t0.Add(2*testPoll))
	objs := objects[iasstandin.Objects](t, e, "ias")
	assert.Equal(t, before.Calls, objs.Calls, "a finished step does not call IAS")
	assert.Equal(t, 1, objs.CreatesByName[spName])
	sp := serviceProvider(t, objs)
	assert.Equal(t, []string{"https://grafana.c-1a2b3c.kyma.example/login/generic_oauth"}, sp.RedirectURIs)
	assert.Equal(t, 1, sp.Secrets)
}

func TestIASType_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.downThenGiveUp(t, iasTypeStep(e), iasRegistered(t, e), "ias", "IAS")
	assert.Contains(t, out.LastError, "configuring OIDC")
	assert.False(t, out.Data.Resources.IASOIDCConfigured)
}

// A service provider IAS no longer has cannot be configured: retrying cannot help.
func TestIASType_MissingServiceProviderFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := ready()
	op.Data.Resources.IASServiceProviderID = "6f1c1f8e-0000-4000-8000-000000000000"
	out, wait, err := e.run(iasTypeStep(e), op, t0)
	assertFailed(t, wait, err, "IAS", "IAS_Type")
	assert.Contains(t, err.Error(), "not found")
	assert.False(t, out.Data.Resources.IASOIDCConfigured)
}
