package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener"
)

// TestControlPlaneInputsReachGardener provisions runtimes with every control-plane input
// through the GraphQL service into the Gardener simulator (which rejects Shoots that break
// shootcontract's rules) and reads each input back from the Shoot Gardener stored.
func TestControlPlaneInputsReachGardener(t *testing.T) {
	e := setup(t, defaultConfig(t))
	ctx := context.Background()
	provision := func(in gqlschema.ProvisionRuntimeInput) *unstructured.Unstructured {
		t.Helper()
		st, err := e.client.ProvisionRuntime(ctx, tenant, in)
		require.NoError(t, err)
		wait(t, e.client, *st.ID, gqlschema.OperationStateSucceeded)
		shoot, err := e.shoot(*in.ClusterConfig.GardenerConfig.Name)
		require.NoError(t, err)
		return shoot
	}
	str := func(s *unstructured.Unstructured, path ...string) string {
		v, _, err := unstructured.NestedString(s.Object, path...)
		require.NoError(t, err, "%v", path)
		return v
	}
	ptr := func(s string) *string { return &s }
	yes, no := true, false

	t.Run("gcp: networks, DNS, HA, exposure class, EU access, same-region seed, networking filter", func(t *testing.T) {
		in := input("cp-gcp")
		g := in.ClusterConfig.GardenerConfig
		g.ExposureClassName = ptr("converged-cloud-internet")
		g.ShootAndSeedSameRegion = &yes
		g.ShootNetworkingFilterDisabled = &no
		shoot := provision(in)

		assert.Equal(t, "100.64.0.0/12", str(shoot, "spec", "networking", "pods"))
		assert.Equal(t, "100.104.0.0/13", str(shoot, "spec", "networking", "services"))
		assert.Equal(t, "cp-gcp.custom.example", str(shoot, "spec", "dns", "domain"))
		providers, _, _ := unstructured.NestedSlice(shoot.Object, "spec", "dns", "providers")
		require.Len(t, providers, 1)
		assert.Equal(t, map[string]any{"type": "aws-route53", "secretName": "dns-secret", "primary": true,
			"domains": map[string]any{"include": []any{"cp-gcp.custom.example"}}}, providers[0])
		assert.Equal(t, "zone", str(shoot, "spec", "controlPlane", "highAvailability", "failureTolerance", "type"))
		assert.Equal(t, "converged-cloud-internet", str(shoot, "spec", "exposureClassName"))
		assert.Equal(t, "true", shoot.GetAnnotations()[gardener.AnnotationEuAccess])
		assert.Equal(t, "europe-west3", str(shoot, "spec", "seedSelector", "matchLabels", gardener.LabelSeedRegion))
		extensions, _, _ := unstructured.NestedSlice(shoot.Object, "spec", "extensions")
		assert.Contains(t, extensions, map[string]any{"type": gardener.NetworkingFilterExtensionType, "disabled": false})
	})

	t.Run("azure: zones with subnets and NAT gateways; the networking filter disabled by default", func(t *testing.T) {
		in := input("cp-azure")
		g := in.ClusterConfig.GardenerConfig
		g.Provider, g.Region, g.TargetSecret, g.MachineType = "azure", "westeurope", "gardener-secret-azure", "Standard_D4s_v5"
		g.DiskType = ptr("Standard_LRS")
		g.ShootNetworkingFilterDisabled = nil
		timeout := 4
		g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{
			VnetCidr: "10.250.0.0/16", EnableNatGateway: &yes, IdleConnectionTimeoutMinutes: &timeout,
			AzureZones: []*gqlschema.AzureZoneInput{{Name: 1, Cidr: "10.250.0.0/19"}, {Name: 2, Cidr: "10.250.32.0/19"}},
		}}
		shoot := provision(in)

		zones, _, _ := unstructured.NestedSlice(shoot.Object, "spec", "provider", "infrastructureConfig", "networks", "zones")
		ng := map[string]any{"enabled": true, "idleConnectionTimeoutMinutes": int64(4)}
		assert.Equal(t, []any{
			map[string]any{"name": int64(1), "cidr": "10.250.0.0/19", "natGateway": ng},
			map[string]any{"name": int64(2), "cidr": "10.250.32.0/19", "natGateway": ng},
		}, zones)
		workers, _, _ := unstructured.NestedSlice(shoot.Object, "spec", "provider", "workers")
		require.Len(t, workers, 1)
		assert.Equal(t, []any{"1", "2"}, workers[0].(map[string]any)["zones"])
		extensions, _, _ := unstructured.NestedSlice(shoot.Object, "spec", "extensions")
		assert.Contains(t, extensions, map[string]any{"type": gardener.NetworkingFilterExtensionType, "disabled": true})
	})

	t.Run("aws: IMDSv2 on the workers", func(t *testing.T) {
		in := input("cp-aws")
		g := in.ClusterConfig.GardenerConfig
		g.Provider, g.Region, g.TargetSecret, g.MachineType = "aws", "eu-central-1", "gardener-secret-aws", "m6i.large"
		g.DiskType = ptr("gp3")
		g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{
			VpcCidr: "10.250.0.0/16", EnableIMDSv2: &yes,
			AWSZones: []*gqlschema.AWSZoneInput{{Name: "eu-central-1a", WorkerCidr: "10.250.0.0/19", PublicCidr: "10.250.32.0/20", InternalCidr: "10.250.48.0/20"}},
		}}
		shoot := provision(in)

		workers, _, _ := unstructured.NestedSlice(shoot.Object, "spec", "provider", "workers")
		require.Len(t, workers, 1)
		assert.Equal(t, map[string]any{
			"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "WorkerConfig",
			"instanceMetadataOptions": map[string]any{"httpTokens": "required", "httpPutResponseHopLimit": int64(gardener.IMDSv2HopLimit)},
		}, workers[0].(map[string]any)["providerConfig"])
	})
}
