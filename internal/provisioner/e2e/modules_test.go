package e2e

import (
	"context"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The components of the Kyma configuration reach the runtime's Kyma resource as exactly these
// spec.modules, with the channel and policy the broker put in their configuration; an upgrade
// with other modules replaces them.
func TestKymaModulesReachTheKymaResource(t *testing.T) {
	e := setup(t, defaultConfig(t))
	ctx := context.Background()
	in := input("modules-1")
	in.KymaConfig.Components = []*gqlschema.ComponentConfigurationInput{
		{Component: "sample", Namespace: "kyma-system", Configuration: []*gqlschema.ConfigEntryInput{
			{Key: modulespec.ConfigKeyChannel, Value: "fast"}, {Key: modulespec.ConfigKeyCustomResourcePolicy, Value: modulespec.PolicyIgnore},
		}},
		{Component: "keda", Namespace: "kyma-system"},
	}
	st, err := e.client.ProvisionRuntime(ctx, tenant, in)
	require.NoError(t, err)
	wait(t, e.client, *st.ID, gqlschema.OperationStateSucceeded)
	assert.Equal(t, []modulespec.ModuleSpec{{Name: "sample", Channel: "fast", CustomResourcePolicy: modulespec.PolicyIgnore}, {Name: "keda", CustomResourcePolicy: modulespec.PolicyCreateAndDel}}, e.kymaModules(t)) // the CRD defaults the policy, as lifecycle-manager's does

	up, err := e.client.UpgradeRuntime(ctx, tenant, *st.RuntimeID, gqlschema.UpgradeRuntimeInput{KymaConfig: &gqlschema.KymaConfigInput{
		Version:    in.KymaConfig.Version,
		Components: []*gqlschema.ComponentConfigurationInput{{Component: "btp-operator", Namespace: "kyma-system"}},
	}})
	require.NoError(t, err)
	wait(t, e.client, *up.ID, gqlschema.OperationStateSucceeded)
	assert.Equal(t, []modulespec.ModuleSpec{{Name: "btp-operator", CustomResourcePolicy: modulespec.PolicyCreateAndDel}}, e.kymaModules(t))

	depID, err := e.client.DeprovisionRuntime(ctx, tenant, *st.RuntimeID)
	require.NoError(t, err)
	wait(t, e.client, depID, gqlschema.OperationStateSucceeded)
}

func (e *env) kymaModules(t *testing.T) []modulespec.ModuleSpec {
	t.Helper()
	k, err := e.dyn.Resource(kymaGVR).Namespace(runtimeclient.KymaNamespace).Get(context.Background(), runtimeclient.KymaName, metav1.GetOptions{})
	require.NoError(t, err)
	mods, err := modulespec.KymaModules(k)
	require.NoError(t, err)
	return mods
}
