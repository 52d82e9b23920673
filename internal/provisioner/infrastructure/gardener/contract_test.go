package gardener

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener/shootcontract"
)

// contractBackendSpec configures everything the contract asks for (cloud profile of OpenStack,
// its floating pool and load balancer provider, the audit log service).
const contractBackendSpec = `{"project": "p", "kubeconfig": "x",
	"audit_logs_policy_config_map": "audit-policy", "audit_logs_tenant": "79c64792-9c1e-4c1b-9941-ef7560dd3eae",
	"audit_log_service_url": "https://auditlog.example.com:3001", "audit_log_secret_name": "auditlog-secret",
	"cloud_profile_openstack": "converged-cloud-kyma",
	"openstack_floating_pool_name": "FloatingIP-external-kyma", "openstack_load_balancer_provider": "f5"}`

// contractClusters are requests as the provisioner's API takes them, one per provider.
var contractClusters = map[string]infrastructure.ClusterConfig{
	"aws": {Provider: "AWS", Region: "eu-central-1", TargetSecret: "aws-secret", MachineType: "m6i.large",
		WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 10, MaxSurge: 1,
		ProviderConfig: json.RawMessage(`{"awsConfig": {"vpcCidr": "10.250.0.0/16", "awsZones": [{"name": "eu-central-1a", "workerCidr": "10.250.0.0/19", "publicCidr": "10.250.32.0/20", "internalCidr": "10.250.48.0/20"}]}}`)},
	"gcp": {Provider: "GCP", Region: "europe-west3", TargetSecret: "gcp-secret", MachineType: "n2-standard-4",
		WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 10, MaxSurge: 1,
		ProviderConfig: json.RawMessage(`{"gcpConfig": {"zones": ["europe-west3-a", "europe-west3-b"]}}`)},
	"azure": {Provider: "Azure", Region: "westeurope", TargetSecret: "azure-secret", MachineType: "Standard_D4s_v5",
		WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 10, MaxSurge: 1,
		ProviderConfig: json.RawMessage(`{"azureConfig": {"vnetCidr": "10.250.0.0/16", "zones": ["1", "2"]}}`)},
	"openstack": {Provider: "OpenStack", Region: "eu-de-1", TargetSecret: "openstack-secret", MachineType: "g_c4_m16",
		WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 10, MaxSurge: 1,
		ProviderConfig: json.RawMessage(`{"openStackConfig": {"zones": ["eu-de-1a"]}}`)},
}

// TestShootContract checks the Shoot the backend writes, for every provider and for Kubernetes
// versions on both sides of 1.34, against each fact of shootcontract's fixture: one subtest
// per fact, so a report names the facts a change breaks or mends.
func TestShootContract(t *testing.T) {
	facts := shootcontract.MustLoad()
	var spec Spec
	require.NoError(t, json.Unmarshal([]byte(contractBackendSpec), &spec))
	b, err := NewWithClient(spec, nil, nil)
	require.NoError(t, err)
	for _, provider := range []string{"aws", "gcp", "azure", "openstack"} {
		for _, version := range []string{"1.33.5", "1.34.1"} {
			c := contractClusters[provider]
			c.KubernetesVersion = version
			sp := infrastructure.Spec{RuntimeID: "rt-" + provider, OperationID: "op-1", Cluster: c}
			shoot, err := b.newShoot(sp)
			require.NoError(t, err, "%s %s", provider, version)
			byRule := map[string][]shootcontract.Violation{}
			for _, v := range facts.Check(shoot.Object) {
				byRule[v.Rule] = append(byRule[v.Rule], v)
			}
			for _, r := range facts.Shoot.Rules {
				if r.Provider != "" && r.Provider != provider {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%s", r.ID, provider, version), func(t *testing.T) {
					for _, v := range byRule[r.ID] {
						t.Errorf("%s (source %s)", v, r.Source)
					}
				})
			}
		}
	}
}

// TestControlPlaneInputsReachTheShoot: each control-plane input of a provisioning request
// lands where Gardener reads it (shootcontract/testdata/gardener.json, controlPlaneInputs),
// and the Shoot still keeps every rule of the contract.
func TestControlPlaneInputsReachTheShoot(t *testing.T) {
	facts := shootcontract.MustLoad()
	var spec Spec
	require.NoError(t, json.Unmarshal([]byte(contractBackendSpec), &spec))
	b, err := NewWithClient(spec, nil, nil)
	require.NoError(t, err)
	path := func(p ...string) []string { return p }
	for _, tc := range []struct {
		name     string
		provider string
		mutate   func(c *infrastructure.ClusterConfig)
		check    func(t *testing.T, shoot map[string]any)
	}{
		{"podsCidr", "gcp", func(c *infrastructure.ClusterConfig) { c.PodsCidr = "100.96.0.0/11" }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, "100.96.0.0/11", nested(t, s, path("spec", "networking", "pods")))
		}},
		{"servicesCidr", "gcp", func(c *infrastructure.ClusterConfig) { c.ServicesCidr = "100.104.0.0/13" }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, "100.104.0.0/13", nested(t, s, path("spec", "networking", "services")))
		}},
		{"dnsConfig", "aws", func(c *infrastructure.ClusterConfig) {
			c.DNS = &infrastructure.DNSConfig{Domain: "shoot.example.com", Providers: []infrastructure.DNSProvider{
				{DomainsInclude: []string{"shoot.example.com"}, Primary: true, SecretName: "route53-secret", Type: "aws-route53"},
			}}
		}, func(t *testing.T, s map[string]any) {
			assert.Equal(t, "shoot.example.com", nested(t, s, path("spec", "dns", "domain")))
			providers, _ := nested(t, s, path("spec", "dns", "providers")).([]any)
			require.Len(t, providers, 1)
			assert.Equal(t, map[string]any{"type": "aws-route53", "secretName": "route53-secret", "primary": true,
				"domains": map[string]any{"include": []any{"shoot.example.com"}}}, providers[0])
		}},
		{"controlPlaneFailureTolerance", "gcp", func(c *infrastructure.ClusterConfig) { c.ControlPlaneFailureTolerance = "zone" }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, "zone", nested(t, s, path("spec", "controlPlane", "highAvailability", "failureTolerance", "type")))
		}},
		{"exposureClassName", "gcp", func(c *infrastructure.ClusterConfig) { c.ExposureClassName = "converged-cloud-internet" }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, "converged-cloud-internet", nested(t, s, path("spec", "exposureClassName")))
		}},
		{"euAccess", "azure", func(c *infrastructure.ClusterConfig) { c.EuAccess = true }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, "true", nested(t, s, path("metadata", "annotations", AnnotationEuAccess)))
		}},
		{"shootAndSeedSameRegion", "aws", func(c *infrastructure.ClusterConfig) { c.ShootAndSeedSameRegion = true }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, "eu-central-1", nested(t, s, path("spec", "seedSelector", "matchLabels", LabelSeedRegion)))
		}},
		{"shootNetworkingFilterDisabled=false", "gcp", func(c *infrastructure.ClusterConfig) { c.ShootNetworkingFilterDisabled = false }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, map[string]any{"type": NetworkingFilterExtensionType, "disabled": false}, extension(t, s, NetworkingFilterExtensionType))
		}},
		{"shootNetworkingFilterDisabled=true", "gcp", func(c *infrastructure.ClusterConfig) { c.ShootNetworkingFilterDisabled = true }, func(t *testing.T, s map[string]any) {
			assert.Equal(t, map[string]any{"type": NetworkingFilterExtensionType, "disabled": true}, extension(t, s, NetworkingFilterExtensionType))
		}},
		{"azureZones", "azure", func(c *infrastructure.ClusterConfig) {
			c.ProviderConfig = json.RawMessage(`{"azureConfig": {"vnetCidr": "10.250.0.0/16", "enableNatGateway": true, "idleConnectionTimeoutMinutes": 4,
				"azureZones": [{"name": 1, "cidr": "10.250.0.0/19"}, {"name": 2, "cidr": "10.250.32.0/19"}]}}`)
		}, func(t *testing.T, s map[string]any) {
			networks, _ := nested(t, s, path("spec", "provider", "infrastructureConfig", "networks")).(map[string]any)
			ng := map[string]any{"enabled": true, "idleConnectionTimeoutMinutes": int64(4)}
			assert.Equal(t, []any{
				map[string]any{"name": int64(1), "cidr": "10.250.0.0/19", "natGateway": ng},
				map[string]any{"name": int64(2), "cidr": "10.250.32.0/19", "natGateway": ng},
			}, networks["zones"])
			assert.NotContains(t, networks, "workers", "zones replace the single workers network")
			assert.Equal(t, true, nested(t, s, path("spec", "provider", "infrastructureConfig", "zoned")))
			workers, _ := nested(t, s, path("spec", "provider", "workers")).([]any)
			require.Len(t, workers, 1)
			assert.Equal(t, []any{"1", "2"}, workers[0].(map[string]any)["zones"])
		}},
		{"enableIMDSv2", "aws", func(c *infrastructure.ClusterConfig) {
			c.ProviderConfig = json.RawMessage(`{"awsConfig": {"vpcCidr": "10.250.0.0/16", "enableIMDSv2": true, "awsZones": [{"name": "eu-central-1a", "workerCidr": "10.250.0.0/19", "publicCidr": "10.250.32.0/20", "internalCidr": "10.250.48.0/20"}]}}`)
		}, func(t *testing.T, s map[string]any) {
			workers, _ := nested(t, s, path("spec", "provider", "workers")).([]any)
			require.Len(t, workers, 1)
			assert.Equal(t, map[string]any{
				"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "WorkerConfig",
				"instanceMetadataOptions": map[string]any{"httpTokens": "required", "httpPutResponseHopLimit": int64(IMDSv2HopLimit)},
			}, workers[0].(map[string]any)["providerConfig"])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := contractClusters[tc.provider]
			c.KubernetesVersion = "1.34.1"
			tc.mutate(&c)
			shoot, err := b.newShoot(infrastructure.Spec{RuntimeID: "rt-" + tc.provider, OperationID: "op-1", Cluster: c})
			require.NoError(t, err)
			tc.check(t, shoot.Object)
			assert.Empty(t, facts.Check(shoot.Object))
		})
	}
}

func nested(t *testing.T, obj map[string]any, path []string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	require.NoError(t, err)
	require.True(t, found, "%v is not set", path)
	return v
}

func extension(t *testing.T, shoot map[string]any, typ string) any {
	t.Helper()
	list, _ := nested(t, shoot, []string{"spec", "extensions"}).([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	t.Fatalf("no extension %s in %v", typ, list)
	return nil
}
