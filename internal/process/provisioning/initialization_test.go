package provisioning_test

import (
	"context"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runInit(t *testing.T, e *env, data instance.ProvisioningData) (Op, error) {
	t.Helper()
	out, wait, err := steptest.Run(context.Background(), provisioning.Initialization{Deps: e.deps}, newOp(data), t0)
	assert.Zero(t, wait, "Initialization never asks to be retried")
	return out, err
}

func TestInitialization_Name(t *testing.T) {
	assert.Equal(t, "Initialization", provisioning.Initialization{}.Name())
}

func TestInitialization_BuildsRuntimeInput(t *testing.T) {
	e := newEnv(t)
	before := getInstance(t, e.store)

	out, err := runInit(t, e, provData("azure", "westeurope"))
	require.NoError(t, err)

	in := out.Data.RuntimeInput
	require.NotNil(t, in)
	assert.Equal(t, "provisioning the runtime", out.Description)

	require.NotNil(t, in.RuntimeInput)
	assert.Equal(t, "c1", in.RuntimeInput.Name)
	assert.Equal(t, gqlschema.Labels{
		"broker_instance_id":          testInstanceID,
		"global_subaccount_id":        testSA,
		"globalaccount":               testGA,
		"subaccount":                  testSA,
		provisioning.IdempotencyLabel: "op-1",
	}, in.RuntimeInput.Labels)
	// The idempotency key is per operation (a replay after a crash gets the same runtime, a
	// resumed suspended trial a new one); the instance is named by broker_instance_id.
	assert.Equal(t, "op-1", in.RuntimeInput.Labels[provisioning.IdempotencyLabel])

	require.NotNil(t, in.ClusterConfig)
	assert.Equal(t, []string{"admin@example.com"}, in.ClusterConfig.Administrators)
	g := in.ClusterConfig.GardenerConfig
	require.NotNil(t, g)
	assert.Equal(t, "1.31", g.KubernetesVersion)
	assert.Equal(t, "azure", g.Provider)
	assert.Equal(t, "westeurope", g.Region)
	assert.Empty(t, g.TargetSecret, "the account secret is Resolve_Target_Secret's, added by Create_Runtime")
	assert.Equal(t, "m1", g.MachineType)
	assert.Equal(t, "10.250.0.0/16", g.WorkerCidr, "default nodes CIDR")
	assert.Equal(t, 3, g.AutoScalerMin)
	assert.Equal(t, 5, g.AutoScalerMax)
	assert.Equal(t, 1, g.MaxSurge)
	assert.Equal(t, 0, g.MaxUnavailable)
	assert.Nil(t, g.OidcConfig, "no OIDC parameters, no OIDC config")

	assert.Nil(t, in.KymaConfig, "the Kyma configuration is built by Create_Runtime, with the collected overrides")
	assert.Equal(t, "2.20.0", out.Data.KymaVersion, "default Kyma version")
	assert.Empty(t, out.Secrets, "no secrets")

	// The step only prepares the request: no provisioner call, no instance write.
	assert.Empty(t, e.prov.Calls())
	assert.Equal(t, before.Version, getInstance(t, e.store).Version)
}

func TestInitialization_BuildsInputOnlyOnce(t *testing.T) {
	e := newEnv(t)
	first, err := runInit(t, e, provData("gcp", "europe-west3"))
	require.NoError(t, err)
	built := first.Data.RuntimeInput

	// A rerun (e.g. after a restart) with other defaults keeps what was built.
	e.deps.Defaults.KymaVersion = "9.9.9"
	e.deps.Defaults.KubernetesVersion = "1.99"
	op := first.ForStep("Initialization", t0)
	op.Data.Parameters.Name = "changed"
	out, wait, err := provisioning.Initialization{Deps: e.deps}.Run(context.Background(), op, steptest.Log())
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Same(t, built, out.Data.RuntimeInput)
	assert.Equal(t, "2.20.0", out.Data.KymaVersion)
	assert.Equal(t, "1.31", out.Data.RuntimeInput.ClusterConfig.GardenerConfig.KubernetesVersion)
	assert.Equal(t, "c1", out.Data.RuntimeInput.RuntimeInput.Name)
}

func TestInitialization_KymaVersionParameter(t *testing.T) {
	e := newEnv(t)
	data := provData("gcp", "europe-west3")
	data.Parameters.KymaVersion = "2.21.1"
	out, err := runInit(t, e, data)
	require.NoError(t, err)
	assert.Equal(t, "2.21.1", out.Data.KymaVersion)
	assert.Nil(t, out.Data.RuntimeInput.KymaConfig)
}

func TestInitialization_ProviderConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		provider, region, nodes string
		want                    gqlschema.ProviderSpecificInput
		wantWorkerCidr          string
	}{
		"gcp": {
			provider: "gcp", region: "europe-west3",
			want:           gqlschema.ProviderSpecificInput{GCPConfig: &gqlschema.GCPProviderConfigInput{Zones: []string{"europe-west3-a"}}},
			wantWorkerCidr: "10.250.0.0/16",
		},
		"azure default nodes": {
			provider: "azure", region: "westeurope",
			want:           gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{VnetCidr: "10.250.0.0/16", Zones: []string{"1"}}},
			wantWorkerCidr: "10.250.0.0/16",
		},
		"azure custom nodes": {
			provider: "azure", region: "westeurope", nodes: "10.100.0.0/16",
			want:           gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{VnetCidr: "10.100.0.0/16", Zones: []string{"1"}}},
			wantWorkerCidr: "10.100.0.0/16",
		},
		"openstack": {
			provider: "openstack", region: "eu-de-1",
			want:           gqlschema.ProviderSpecificInput{OpenStackConfig: &gqlschema.OpenStackProviderConfigInput{Zones: []string{"eu-de-1a"}}},
			wantWorkerCidr: "10.250.0.0/16",
		},
		"aws default nodes": {
			provider: "aws", region: "eu-central-1",
			want: gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{
				VpcCidr: "10.250.0.0/16",
				AWSZones: []*gqlschema.AWSZoneInput{{
					Name: "eu-central-1a", WorkerCidr: "10.250.0.0/19", PublicCidr: "10.250.32.0/20", InternalCidr: "10.250.48.0/20",
				}},
			}},
			wantWorkerCidr: "10.250.0.0/16",
		},
		"aws subnets from the nodes CIDR": {
			provider: "aws", region: "us-east-1", nodes: "10.180.0.0/16",
			want: gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{
				VpcCidr: "10.180.0.0/16",
				AWSZones: []*gqlschema.AWSZoneInput{{
					Name: "us-east-1a", WorkerCidr: "10.180.0.0/19", PublicCidr: "10.180.32.0/20", InternalCidr: "10.180.48.0/20",
				}},
			}},
			wantWorkerCidr: "10.180.0.0/16",
		},
		"aws larger than /16": {
			provider: "aws", region: "us-east-1", nodes: "172.16.0.0/12",
			want: gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{
				VpcCidr: "172.16.0.0/12",
				AWSZones: []*gqlschema.AWSZoneInput{{
					Name: "us-east-1a", WorkerCidr: "172.16.0.0/19", PublicCidr: "172.16.32.0/20", InternalCidr: "172.16.48.0/20",
				}},
			}},
			wantWorkerCidr: "172.16.0.0/12",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			data := provData(tc.provider, tc.region)
			if tc.nodes != "" {
				data.Parameters.Networking = &instance.Networking{Nodes: tc.nodes, Pods: "100.64.0.0/12", Services: "100.104.0.0/13"}
			}
			out, err := runInit(t, e, data)
			require.NoError(t, err)
			g := out.Data.RuntimeInput.ClusterConfig.GardenerConfig
			require.NotNil(t, g.ProviderSpecificConfig)
			assert.Equal(t, tc.want, *g.ProviderSpecificConfig)
			assert.Equal(t, tc.wantWorkerCidr, g.WorkerCidr)
			assert.Equal(t, tc.provider, g.Provider)
		})
	}
}

func TestInitialization_Errors(t *testing.T) {
	for name, tc := range map[string]struct {
		provider, nodes, wantErr string
	}{
		"aws /24 nodes CIDR": {provider: "aws", nodes: "10.250.0.0/24", wantErr: "too small for AWS subnets"},
		"aws /17 nodes CIDR": {provider: "aws", nodes: "10.250.0.0/17", wantErr: "too small for AWS subnets"},
		"aws invalid CIDR":   {provider: "aws", nodes: "not-a-cidr", wantErr: `nodes CIDR "not-a-cidr"`},
		"unknown provider":   {provider: "alicloud", wantErr: `unknown provider "alicloud"`},
		"empty provider":     {provider: "", wantErr: `unknown provider ""`},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			data := provData(tc.provider, "eu-central-1")
			if tc.nodes != "" {
				data.Parameters.Networking = &instance.Networking{Nodes: tc.nodes}
			}
			out, err := runInit(t, e, data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "preparing the runtime request")
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Nil(t, out.Data.RuntimeInput, "nothing is built on error")
			assert.Empty(t, e.prov.Calls())
		})
	}
}

func TestInitialization_OIDC(t *testing.T) {
	t.Run("all fields", func(t *testing.T) {
		e := newEnv(t)
		data := provData("gcp", "europe-west3")
		data.Parameters.OIDC = &instance.OIDC{
			ClientID: "client", IssuerURL: "https://issuer.example", GroupsClaim: "groups",
			UsernameClaim: "sub", UsernamePrefix: "oidc:", SigningAlgs: []string{"RS256", "ES256"},
		}
		out, err := runInit(t, e, data)
		require.NoError(t, err)
		assert.Equal(t, &gqlschema.OIDCConfigInput{
			ClientID: "client", IssuerURL: "https://issuer.example", GroupsClaim: strp("groups"),
			UsernameClaim: strp("sub"), UsernamePrefix: strp("oidc:"), SigningAlgs: []string{"RS256", "ES256"},
		}, out.Data.RuntimeInput.ClusterConfig.GardenerConfig.OidcConfig)
	})
	t.Run("empty optional fields stay unset", func(t *testing.T) {
		e := newEnv(t)
		data := provData("gcp", "europe-west3")
		data.Parameters.OIDC = &instance.OIDC{ClientID: "client", IssuerURL: "https://issuer.example", UsernamePrefix: "-"}
		out, err := runInit(t, e, data)
		require.NoError(t, err)
		got := out.Data.RuntimeInput.ClusterConfig.GardenerConfig.OidcConfig
		require.NotNil(t, got)
		assert.Equal(t, "client", got.ClientID)
		assert.Equal(t, "https://issuer.example", got.IssuerURL)
		assert.Nil(t, got.GroupsClaim)
		assert.Nil(t, got.UsernameClaim)
		assert.Equal(t, strp("-"), got.UsernamePrefix)
		assert.Nil(t, got.SigningAlgs)
	})
}
