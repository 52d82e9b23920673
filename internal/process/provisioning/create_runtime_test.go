package provisioning_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const createRetryTime = 10 * time.Minute

func createStep(e *env) step {
	return provisioning.CreateRuntime{Deps: e.deps, RetryTime: createRetryTime}
}

// initialized is a provisioning operation after Initialization and Resolve_Target_Secret ran.
func initialized(t *testing.T, e *env) Op {
	t.Helper()
	op := e.mustRun(t, provisioning.Initialization{Deps: e.deps}, newOp(provData("azure", "westeurope")), t0)
	return e.mustRun(t, provisioning.ResolveTargetSecret{Deps: e.deps}, op, t0)
}

func runCreate(e *env, op Op, now time.Time) (Op, time.Duration, error) {
	return e.run(createStep(e), op, now)
}

func TestCreateRuntime_Name(t *testing.T) {
	assert.Equal(t, "Create_Runtime", provisioning.CreateRuntime{}.Name())
}

func TestCreateRuntime_Success(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	op := initialized(t, e)

	out, wait, err := runCreate(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
	assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID)
	assert.Empty(t, out.LastError)

	calls := e.prov.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "ProvisionRuntime", calls[0].Method)
	assert.Equal(t, testGA, calls[0].Tenant, "the tenant is the global account")
	req := calls[0].Provision
	require.NotNil(t, req)
	assert.Equal(t, op.Data.RuntimeInput.RuntimeInput, req.RuntimeInput, "the runtime Initialization built")
	assert.Equal(t, "kyma-azure", req.ClusterConfig.GardenerConfig.TargetSecret, "the resolved account")
	// Without a reconciler the provisioner installs Kyma.
	require.NotNil(t, req.KymaConfig)
	assert.Equal(t, "2.20.0", req.KymaConfig.Version)
	assert.Equal(t, []*gqlschema.ComponentConfigurationInput{
		{Component: "istio", Namespace: "kyma-system"},
		{Component: "serverless", Namespace: "kyma-system"},
	}, req.KymaConfig.Components)

	// The request is built on every call, never stored; once accepted, what Initialization
	// prepared is dropped from the data.
	assert.Empty(t, op.Data.RuntimeInput.ClusterConfig.GardenerConfig.TargetSecret)
	assert.Nil(t, op.Data.RuntimeInput.KymaConfig)
	assert.Nil(t, out.Data.RuntimeInput, "not carried by later saves")

	inst := getInstance(t, e.store)
	assert.Equal(t, "rt-1", inst.RuntimeID)
	assert.Nil(t, inst.DeletedAt)
	assert.Empty(t, inst.DashboardURL)

	// A rerun that finds the runtime ID stored writes nothing to the instance.
	_, wait, err = runCreate(e, out, t0.Add(testPoll))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, inst.Version, getInstance(t, e.store).Version)
	assert.Len(t, e.prov.Calls(), 1)
}

// The provisioner installs Kyma 1.x with the overrides the earlier steps collected; their secret
// values go into the request, marked secret, and stay out of the operation's data.
func TestCreateRuntime_Kyma1GetsTheOverrides(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	op := initialized(t, e)
	op.Data.KymaVersion = "1.24.8"
	op.Data.Overrides.Set(&op.Secrets, overrides.Global, overrides.Entry{Key: "global.domainName", Value: "kyma.example"})
	op.Data.Overrides.Set(&op.Secrets, "serverless", overrides.Entry{Key: "dockerRegistry.password", Value: "s3cret", Secret: true})
	op.Data.Overrides.Set(&op.Secrets, provisioning.KafkaComponent, overrides.Entry{Key: provisioning.KafkaProviderKey, Value: "azure"})

	out, wait, err := runCreate(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)

	secret := true
	k := e.prov.Calls()[0].Provision.KymaConfig
	require.NotNil(t, k)
	assert.Equal(t, "1.24.8", k.Version)
	assert.Equal(t, []*gqlschema.ConfigEntryInput{{Key: "global.domainName", Value: "kyma.example"}}, k.Configuration)
	assert.Equal(t, []*gqlschema.ComponentConfigurationInput{
		{Component: "istio", Namespace: "kyma-system"},
		{Component: "serverless", Namespace: "kyma-system", Configuration: []*gqlschema.ConfigEntryInput{{Key: "dockerRegistry.password", Value: "s3cret", Secret: &secret}}},
		{Component: provisioning.KafkaComponent, Namespace: "kyma-system", Configuration: []*gqlschema.ConfigEntryInput{{Key: provisioning.KafkaProviderKey, Value: "azure"}}},
	}, k.Components, "the default components, then those with overrides")
	assertNotInData(t, out, "s3cret")
}

// The modules parameter decides the components: a list gives exactly those modules, with their
// channel and policy for the Kyma resource; default false none.
func TestCreateRuntime_ModulesParameter(t *testing.T) {
	no := false
	for name, tc := range map[string]struct {
		modules *instance.Modules
		want    []*gqlschema.ComponentConfigurationInput
	}{
		"list": {&instance.Modules{List: []instance.Module{{Name: "keda", Channel: "fast", CustomResourcePolicy: "Ignore"}, {Name: "serverless"}}},
			[]*gqlschema.ComponentConfigurationInput{
				{Component: "keda", Namespace: "kyma-system", Configuration: []*gqlschema.ConfigEntryInput{
					{Key: modulespec.ConfigKeyChannel, Value: "fast"}, {Key: modulespec.ConfigKeyCustomResourcePolicy, Value: "Ignore"}}},
				{Component: "serverless", Namespace: "kyma-system", Configuration: []*gqlschema.ConfigEntryInput{{Key: "function.replicas", Value: "2"}}},
			}},
		"none": {&instance.Modules{Default: &no}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
			op := initialized(t, e)
			op.Data.KymaVersion = "1.24.8"
			op.Data.Parameters.Modules = tc.modules
			// Overrides of a component not listed do not add it.
			op.Data.Overrides.Set(&op.Secrets, "serverless", overrides.Entry{Key: "function.replicas", Value: "2"})
			op.Data.Overrides.Set(&op.Secrets, "eventing", overrides.Entry{Key: "nats.replicas", Value: "3"})
			_, _, err := runCreate(e, op, t0)
			require.NoError(t, err)
			assert.Equal(t, tc.want, e.prov.Calls()[0].Provision.KymaConfig.Components)
		})
	}
}

// Kyma 2.x is installed by the reconciler (create_kyma): the provisioner only creates the cluster.
func TestCreateRuntime_Kyma2WithReconcilerHasNoKymaConfig(t *testing.T) {
	e := newSystemsEnv(t, standins.Options{})
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	op := initialized(t, e)
	op.Data.Overrides.Set(&op.Secrets, "serverless", overrides.Entry{Key: "dockerRegistry.password", Value: "s3cret", Secret: true})

	e.mustRun(t, createStep(e), op, t0)
	req := e.prov.Calls()[0].Provision
	assert.Nil(t, req.KymaConfig)
	assert.Equal(t, "kyma-azure", req.ClusterConfig.GardenerConfig.TargetSecret)
}

func TestCreateRuntime_MissingSecretValueFails(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	op := initialized(t, e)
	op.Data.Overrides.Set(&op.Secrets, "serverless", overrides.Entry{Key: "dockerRegistry.password", Value: "s3cret", Secret: true})
	op.Secrets = nil // lost

	_, wait, err := runCreate(e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "preparing the runtime request")
	assert.Contains(t, err.Error(), "secret value missing")
	assert.Empty(t, e.prov.Calls(), "no incomplete runtime is requested")
}

func TestCreateRuntime_SkipsWhenAlreadyRequested(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = acceptingProvisioner("rt-other", "pop-other")
	op := initialized(t, e)
	op.Data.RuntimeID, op.Data.ProvisionerOperationID = "rt-1", "pop-1"

	out, wait, err := runCreate(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, e.prov.Calls(), "no second provisioning request")
	assert.Equal(t, "rt-1", out.Data.RuntimeID)
	assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID)
	assert.Equal(t, "rt-1", getInstance(t, e.store).RuntimeID, "the instance has the runtime ID requested earlier")
}

func TestCreateRuntime_TransientErrorRetries(t *testing.T) {
	for name, provErr := range map[string]error{
		"internal":  errors.New("connection refused"),
		"conflict":  apperr.Conflict("busy"),
		"not found": apperr.NotFound("no such tenant"),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.provision = func(string, gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) { return nil, provErr }
			op := initialized(t, e)
			before := getInstance(t, e.store)

			out, wait, err := runCreate(e, op, t0)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Contains(t, out.LastError, "calling the provisioner")
			assert.Contains(t, out.LastError, provErr.Error())
			assert.Empty(t, out.Data.RuntimeID)
			assert.Empty(t, out.Data.ProvisionerOperationID)
			after := getInstance(t, e.store)
			assert.Equal(t, before.Version, after.Version, "nothing written")
			assert.Empty(t, after.RuntimeID)
		})
	}
}

func TestCreateRuntime_GivesUpAfterRetryTime(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = func(string, gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
		return nil, errors.New("connection refused")
	}
	op := initialized(t, e)

	// Still within the retry time: retry.
	op.Progress.Steps = map[string]storage.StepProgress{"Create_Runtime": {FirstAttempt: t0.Add(-createRetryTime + time.Second), Attempts: 5}}
	_, wait, err := runCreate(e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)

	// First attempt old enough: give up.
	op.Progress.Steps = map[string]storage.StepProgress{"Create_Runtime": {FirstAttempt: t0.Add(-createRetryTime), Attempts: 9}}
	_, wait, err = runCreate(e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "provisioner")
	assert.Contains(t, err.Error(), "connection refused")
	assert.Contains(t, err.Error(), "step Create_Runtime gave up after 10m0s")
	assert.Empty(t, getInstance(t, e.store).RuntimeID)
}

func TestCreateRuntime_BadRequestFails(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = func(string, gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
		return nil, apperr.BadRequest("config.clusterConfig.gardenerConfig.region", "unknown region %q", "mars-1")
	}
	op := initialized(t, e)

	out, wait, err := runCreate(e, op, t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "the provisioner rejected the runtime")
	assert.Contains(t, err.Error(), `config.clusterConfig.gardenerConfig.region: unknown region "mars-1"`)
	assert.Equal(t, apperr.CodeBadRequest, apperr.CodeOf(err), "the code survives wrapping")
	assert.Empty(t, out.Data.ProvisionerOperationID)
	assert.Empty(t, getInstance(t, e.store).RuntimeID)
	assert.Len(t, e.prov.Calls(), 1, "a bad request is not retried")
}

// A run whose provisioning request was accepted but whose instance write failed must, when
// rerun, still give the instance its runtime ID without asking the provisioner again:
// otherwise deprovisioning finds no runtime and leaks the cluster.
func TestCreateRuntime_InstanceWriteFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	e.prov.provision = acceptingProvisioner("rt-1", "pop-1")
	op := initialized(t, e)

	failing := &steptest.FailingInstances{Instances: e.store.Instances(), Fails: 1}
	deps := e.deps
	deps.Instances = failing
	out, wait, err := steptest.Run(context.Background(), provisioning.CreateRuntime{Deps: deps, RetryTime: createRetryTime}, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)
	assert.Contains(t, out.LastError, "storing the runtime ID")
	assert.Contains(t, out.LastError, "database is down")
	assert.Equal(t, "pop-1", out.Data.ProvisionerOperationID, "the accepted request is kept")
	assert.Empty(t, getInstance(t, e.store).RuntimeID)

	// The engine persists out and runs the step again.
	out, wait, err = runCreate(e, out, t0.Add(testPoll))
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Len(t, e.prov.Calls(), 1, "the runtime is not requested twice")
	assert.Equal(t, "rt-1", getInstance(t, e.store).RuntimeID)
	assert.Empty(t, out.LastError, "no stale error once the step succeeded")
}
