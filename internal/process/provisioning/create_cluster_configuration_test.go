package provisioning_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func applyStep(e *env) step { return provisioning.CreateClusterConfiguration{Deps: e.deps} }

// withKubeconfig is a finished runtime after Get_Kubeconfig, with overrides the earlier steps set.
func withKubeconfig() Op {
	op := ready()
	op.Secrets = map[string]string{provisioning.KubeconfigSecret: testKubeconfig}
	op.Data.Overrides.Set(&op.Secrets, overrides.Global, overrides.Entry{Key: "global.domainName", Value: "kyma.example"})
	op.Data.Overrides.Set(&op.Secrets, provisioning.MonitoringComponent,
		overrides.Entry{Key: provisioning.GrafanaClientIDKey, Value: "ias-client"},
		overrides.Entry{Key: provisioning.GrafanaClientSecretK, Value: "ias-s3cret", Secret: true})
	return op
}

// cluster returns the reconciler's only cluster.
func cluster(t *testing.T, e *env) reconcilerstandin.Object {
	t.Helper()
	objs := objects[reconcilerstandin.Objects](t, e, "reconciler")
	require.Len(t, objs.Clusters, 1)
	return objs.Clusters[0]
}

func TestCreateClusterConfiguration_Name(t *testing.T) {
	assert.Equal(t, "Create_Cluster_Configuration", provisioning.CreateClusterConfiguration{}.Name())
}

func TestCreateClusterConfiguration_HandsTheClusterToTheReconciler(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.mustRun(t, applyStep(e), withKubeconfig(), t0)
	assert.Equal(t, int64(1), out.Data.ReconcilerConfigurationVersion)
	assert.Equal(t, "rt-1", out.Data.Resources.ReconcilerClusterID, "deprovisioning removes it")
	assert.Empty(t, out.LastError)

	c := cluster(t, e)
	assert.Equal(t, "rt-1", c.RuntimeID)
	assert.Equal(t, int64(1), c.ConfigurationVersion)
	assert.Equal(t, reconcilerstandin.RuntimeInput{Name: "c1", Description: "Kyma runtime of instance " + testInstanceID}, c.RuntimeInput)
	assert.Equal(t, reconcilerstandin.Metadata{
		GlobalAccountID: testGA, SubAccountID: testSA, ServiceID: "svc", ServicePlanID: "plan-azure", ServicePlanName: "azure",
		ShootName: "c-1a2b3c", InstanceID: testInstanceID, Region: "westeurope",
	}, c.Metadata)
	assert.Equal(t, "2.20.0", c.KymaVersion)
	assert.Equal(t, "production", c.Profile)
	assert.Equal(t, []string{"admin@example.com"}, c.Administrators)
	assert.Equal(t, len(testKubeconfig), c.Kubeconfig.Length)

	// Every component gets the global entries and its own, secrets marked (and masked by the
	// stand-in's snapshot), and the URL (none: from the Kyma release) and version the API requires.
	global := reconcilerstandin.Configuration{Key: "global.domainName", Value: "kyma.example"}
	assert.Equal(t, []reconcilerstandin.Component{
		{Component: "istio", Namespace: "kyma-system", Version: "2.20.0", Configuration: []reconcilerstandin.Configuration{global}},
		{Component: "serverless", Namespace: "kyma-system", Version: "2.20.0", Configuration: []reconcilerstandin.Configuration{global}},
		{Component: provisioning.MonitoringComponent, Namespace: "kyma-system", Version: "2.20.0", Configuration: []reconcilerstandin.Configuration{
			global,
			{Key: provisioning.GrafanaClientIDKey, Value: "ias-client"},
			{Key: provisioning.GrafanaClientSecretK, Value: reconcilerstandin.Masked, Secret: true},
		}},
	}, c.Components)
	assertNotInData(t, out, "ias-s3cret", "kubeconfig-t0ken")
}

// Trial runtimes get the evaluation profile; without administrators the user who created the
// instance administers it.
func TestCreateClusterConfiguration_TrialAndDefaultAdministrator(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := withKubeconfig()
	op.Data.PlanName = "trial"
	op.Data.Parameters.Administrators = nil
	e.mustRun(t, applyStep(e), op, t0)
	c := cluster(t, e)
	assert.Equal(t, "evaluation", c.Profile)
	assert.Equal(t, []string{"u1"}, c.Administrators)
}

func TestCreateClusterConfiguration_Idempotent(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := withKubeconfig()
	first := e.mustRun(t, applyStep(e), op, t0)
	// Lost result: applying the same configuration again creates no new version.
	again := e.mustRun(t, applyStep(e), op, t0.Add(testPoll))
	assert.Equal(t, first.Data.ReconcilerConfigurationVersion, again.Data.ReconcilerConfigurationVersion)
	// A rerun of the finished step does not call the reconciler.
	e.mustRun(t, applyStep(e), again, t0.Add(2*testPoll))

	c := cluster(t, e)
	assert.Equal(t, 1, c.Creations)
	assert.Equal(t, 1, c.ConfigurationVersionsCreated, "exactly one configuration")
	assert.Equal(t, 2, c.Calls["apply"])
}

func TestCreateClusterConfiguration_DownRetriesThenFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	out := e.downThenGiveUp(t, applyStep(e), withKubeconfig(), "reconciler", "Reconciler")
	assert.Contains(t, out.LastError, "applying the cluster configuration")
	assert.Zero(t, out.Data.ReconcilerConfigurationVersion)
	assert.Empty(t, objects[reconcilerstandin.Objects](t, e, "reconciler").Clusters)
}

// A configuration the reconciler rejects (here: no kubeconfig) fails at once.
func TestCreateClusterConfiguration_RejectedConfigurationFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := withKubeconfig()
	delete(op.Secrets, provisioning.KubeconfigSecret)
	out, wait, err := e.run(applyStep(e), op, t0)
	assertFailed(t, wait, err, "Reconciler", "Create_Cluster_Configuration")
	assert.Contains(t, err.Error(), "kubeconfig is required")
	assert.Zero(t, out.Data.ReconcilerConfigurationVersion)
}

func TestCreateClusterConfiguration_MissingSecretValueFails(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	op := withKubeconfig()
	delete(op.Secrets, overrides.SecretKey(provisioning.MonitoringComponent, provisioning.GrafanaClientSecretK))
	_, wait, err := e.run(applyStep(e), op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "secret value missing")
	assert.Empty(t, objects[reconcilerstandin.Objects](t, e, "reconciler").Clusters, "no incomplete configuration is applied")
}
