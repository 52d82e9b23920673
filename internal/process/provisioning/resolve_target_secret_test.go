package provisioning_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func resolveStep(e *env) step { return provisioning.ResolveTargetSecret{Deps: e.deps} }

func setPool(t *testing.T, e *env, spec string) {
	t.Helper()
	pool, err := hyperscaler.ParsePool(spec)
	require.NoError(t, err)
	e.deps.Systems.AccountPool = pool
}

func TestResolveTargetSecret_Name(t *testing.T) {
	assert.Equal(t, "Resolve_Target_Secret", provisioning.ResolveTargetSecret{}.Name())
}

func TestResolveTargetSecret_PicksTheProvidersSecret(t *testing.T) {
	for provider, want := range map[string]string{"azure": "kyma-azure", "aws": "kyma-aws", "gcp": "kyma-gcp", "openstack": "kyma-openstack"} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t)
			out := e.mustRun(t, resolveStep(e), newOp(provData(provider, "r")), t0)
			assert.Equal(t, want, out.Data.TargetSecret)
			assert.Empty(t, out.LastError)
			assert.Empty(t, out.Secrets, "the secret's name is no secret; its credentials stay in Gardener")
			assert.Empty(t, e.prov.Calls())
		})
	}
}

// Every runtime of a global account is created with the same hyperscaler account, whichever
// broker replica resolves it; other global accounts spread over the pool.
func TestResolveTargetSecret_SameAccountPerGlobalAccount(t *testing.T) {
	e := newEnv(t)
	setPool(t, e, "azure:az-1,az-2,az-3,az-4")
	picked := map[string]bool{}
	for i, ga := range []string{"ga-1", "ga-2", "ga-3", "ga-4", "ga-5", "ga-6", "ga-7", "ga-8"} {
		data := provData("azure", "westeurope")
		data.Context.GlobalAccountID = ga
		first := e.mustRun(t, resolveStep(e), newOp(data), t0)
		again := e.mustRun(t, resolveStep(e), newOp(data), t0.Add(testPoll))
		assert.Equal(t, first.Data.TargetSecret, again.Data.TargetSecret, "global account %d", i)
		assert.Contains(t, []string{"az-1", "az-2", "az-3", "az-4"}, first.Data.TargetSecret)
		picked[first.Data.TargetSecret] = true
	}
	assert.Greater(t, len(picked), 1, "global accounts spread over the pool")
}

// A resolved secret is kept: a rerun after the pool changed must not move the runtime to another
// account.
func TestResolveTargetSecret_KeepsTheResolvedSecret(t *testing.T) {
	e := newEnv(t)
	out := e.mustRun(t, resolveStep(e), newOp(provData("azure", "westeurope")), t0)
	require.Equal(t, "kyma-azure", out.Data.TargetSecret)

	setPool(t, e, "azure:kyma-azure-new")
	again := e.mustRun(t, resolveStep(e), out, t0.Add(testPoll))
	assert.Equal(t, "kyma-azure", again.Data.TargetSecret)
}

func TestResolveTargetSecret_NoSecretFails(t *testing.T) {
	e := newEnv(t)
	setPool(t, e, "aws:kyma-aws")
	out, wait, err := e.run(resolveStep(e), newOp(provData("azure", "westeurope")), t0)
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), hyperscaler.ErrNoSecret.Error())
	assert.Contains(t, err.Error(), "step Resolve_Target_Secret failed", "a configuration problem fails at once")
	assert.Contains(t, err.Error(), "hyperscaler account pool")
	assert.Contains(t, err.Error(), `"azure"`)
	assert.Empty(t, out.Data.TargetSecret)
}
