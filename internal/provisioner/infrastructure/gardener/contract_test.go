package gardener

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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
