package service

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullGardener sets every field of the input.
func fullGardener() gqlschema.GardenerConfigInput {
	return gqlschema.GardenerConfigInput{
		Name: ptr("c-full"), KubernetesVersion: "1.31.2", Provider: "aws", TargetSecret: "aws-secret", Region: "eu-central-1",
		MachineType: "m6i.large", MachineImage: ptr("gardenlinux"), MachineImageVersion: ptr("1592.1.0"), DiskType: ptr("gp3"),
		VolumeSizeGb: ptr(80), WorkerCidr: "10.250.0.0/16", AutoScalerMin: 2, AutoScalerMax: 10, MaxSurge: 3, MaxUnavailable: 0,
		Purpose: ptr("production"), LicenceType: ptr("partner"), EnableKubernetesVersionAutoUpdate: ptr(true),
		EnableMachineImageVersionAutoUpdate: ptr(false),
		ProviderSpecificConfig: &gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{
			VpcCidr: "10.250.0.0/16", AWSZones: []*gqlschema.AWSZoneInput{{
				Name: "eu-central-1a", WorkerCidr: "10.250.0.0/19", PublicCidr: "10.250.32.0/20", InternalCidr: "10.250.48.0/20",
			}},
		}},
		Seed: ptr("aws-eu1"), ExposureClassName: ptr("internet"), EuAccess: ptr(true),
		OidcConfig: &gqlschema.OIDCConfigInput{ClientID: "kyma", IssuerURL: "https://issuer.example", GroupsClaim: ptr("groups"),
			SigningAlgs: []string{"RS256"}, UsernameClaim: ptr("sub"), UsernamePrefix: ptr("-")},
		PodsCidr: ptr("100.64.0.0/12"), ServicesCidr: ptr("100.104.0.0/13"),
		DNSConfig: &gqlschema.DNSConfigInput{Domain: "full.example.com", Providers: []*gqlschema.DNSProviderInput{
			{DomainsInclude: []string{"full.example.com"}, Primary: true, SecretName: "dns-secret", Type: "aws-route53"},
		}},
		ShootNetworkingFilterDisabled: ptr(false), ControlPlaneFailureTolerance: ptr("zone"), ShootAndSeedSameRegion: ptr(true),
	}
}

func TestMergeUpgradeKeepsUnsetFields(t *testing.T) {
	cur := fullGardener()
	pristine := fullGardener()

	assert.Equal(t, cur, mergeUpgrade(cur, &gqlschema.GardenerUpgradeInput{}), "an empty upgrade changes nothing")

	merged := mergeUpgrade(cur, &gqlschema.GardenerUpgradeInput{MachineType: ptr("m6i.xlarge"), AutoScalerMax: ptr(20)})
	want := fullGardener()
	want.MachineType, want.AutoScalerMax = "m6i.xlarge", 20
	assert.Equal(t, want, merged)
	assert.Equal(t, pristine, cur, "the current configuration is not changed")

	newPSC := &gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{VpcCidr: "10.1.0.0/16"}}
	newOIDC := &gqlschema.OIDCConfigInput{ClientID: "other", IssuerURL: "https://other.example"}
	all := &gqlschema.GardenerUpgradeInput{
		KubernetesVersion: ptr("1.32"), MachineType: ptr("m7i.large"), DiskType: ptr("io1"), VolumeSizeGb: ptr(100),
		AutoScalerMin: ptr(3), AutoScalerMax: ptr(12), MaxSurge: ptr(4), MaxUnavailable: ptr(1), Purpose: ptr("development"),
		MachineImage: ptr("ubuntu"), MachineImageVersion: ptr("24.04"), EnableKubernetesVersionAutoUpdate: ptr(false),
		EnableMachineImageVersionAutoUpdate: ptr(true), ProviderSpecificConfig: newPSC, OidcConfig: newOIDC,
		ExposureClassName: ptr("private"), ShootNetworkingFilterDisabled: ptr(true),
	}
	merged = mergeUpgrade(cur, all)
	want = fullGardener()
	want.KubernetesVersion, want.MachineType, want.DiskType, want.VolumeSizeGb = "1.32", "m7i.large", ptr("io1"), ptr(100)
	want.AutoScalerMin, want.AutoScalerMax, want.MaxSurge, want.MaxUnavailable = 3, 12, 4, 1
	want.Purpose, want.MachineImage, want.MachineImageVersion = ptr("development"), ptr("ubuntu"), ptr("24.04")
	want.EnableKubernetesVersionAutoUpdate, want.EnableMachineImageVersionAutoUpdate = ptr(false), ptr(true)
	want.ProviderSpecificConfig, want.OidcConfig, want.ExposureClassName = newPSC, newOIDC, ptr("private")
	want.ShootNetworkingFilterDisabled = ptr(true)
	assert.Equal(t, want, merged)
	// What an upgrade cannot change stays.
	assert.Equal(t, "c-full", *merged.Name)
	assert.Equal(t, "aws", merged.Provider)
	assert.Equal(t, "eu-central-1", merged.Region)
	assert.Equal(t, "aws-eu1", *merged.Seed)
	assert.Equal(t, pristine, cur)
}

func TestClusterConfig(t *testing.T) {
	g := fullGardener()
	g.Provider = "AWS"
	c, err := clusterConfig(g, "c-full")
	require.NoError(t, err)
	psc, err := json.Marshal(g.ProviderSpecificConfig)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.ClusterConfig{
		Name: "c-full", KubernetesVersion: "1.31.2", Provider: "aws", Region: "eu-central-1", TargetSecret: "aws-secret",
		MachineType: "m6i.large", MachineImage: "gardenlinux", MachineImageVer: "1592.1.0", DiskType: "gp3", VolumeSizeGB: 80,
		WorkerCidr: "10.250.0.0/16", AutoScalerMin: 2, AutoScalerMax: 10, MaxSurge: 3, MaxUnavailable: 0,
		Purpose: "production", LicenceType: "partner", Seed: "aws-eu1", ProviderConfig: psc,
		PodsCidr: "100.64.0.0/12", ServicesCidr: "100.104.0.0/13", ExposureClassName: "internet",
		DNS: &infrastructure.DNSConfig{Domain: "full.example.com", Providers: []infrastructure.DNSProvider{
			{DomainsInclude: []string{"full.example.com"}, Primary: true, SecretName: "dns-secret", Type: "aws-route53"},
		}},
		ShootNetworkingFilterDisabled: false, ControlPlaneFailureTolerance: "zone", EuAccess: true, ShootAndSeedSameRegion: true,
	}, c)

	// Unset, the Shoot Networking Filter is disabled, as the real provisioner does.
	g.ShootNetworkingFilterDisabled = nil
	c, err = clusterConfig(g, "c-full")
	require.NoError(t, err)
	assert.True(t, c.ShootNetworkingFilterDisabled)
}

func TestKymaFromInputMovesSecretsOut(t *testing.T) {
	k, secrets := kymaFromInput(validKyma())
	assert.Equal(t, &operations.Kyma{
		Version: "2.20.0", Profile: "Evaluation",
		Components: []operations.Component{
			{Name: "istio", Namespace: "istio-system", Configuration: []operations.ConfigEntry{
				{Key: "gateway.replicas", Value: "2"},
				{Key: "certificate.key", Secret: true, SecretKey: "kyma/istio/certificate.key"},
			}},
			{Name: "serverless", Namespace: "kyma-system", SourceURL: "https://example.com/serverless.yaml"},
		},
		Configuration: []operations.ConfigEntry{
			{Key: "global.domain", Value: "example.com"},
			{Key: "global.password", Secret: true, SecretKey: "kyma/_global/global.password"},
		},
	}, k)
	assert.Equal(t, storage.Secrets{
		"kyma/_global/global.password": "hunter2",
		"kyma/istio/certificate.key":   "istio-private-key",
	}, secrets)

	k, secrets = kymaFromInput(nil)
	assert.Nil(t, k)
	assert.Nil(t, secrets)
}

func TestKymaOutputMasksSecrets(t *testing.T) {
	k, _ := kymaFromInput(validKyma())
	out := kymaOutput(k)
	yes := true
	assert.Equal(t, &gqlschema.KymaConfig{
		Version: ptr("2.20.0"), Profile: ptr(gqlschema.KymaProfileEvaluation),
		Components: []*gqlschema.ComponentConfiguration{
			{Component: "istio", Namespace: "istio-system", Configuration: []*gqlschema.ConfigEntry{
				{Key: "gateway.replicas", Value: "2"},
				{Key: "certificate.key", Value: "***", Secret: &yes},
			}},
			{Component: "serverless", Namespace: "kyma-system", SourceURL: ptr("https://example.com/serverless.yaml")},
		},
		Configuration: []*gqlschema.ConfigEntry{
			{Key: "global.domain", Value: "example.com"},
			{Key: "global.password", Value: "***", Secret: &yes},
		},
	}, out)
	assert.Nil(t, kymaOutput(nil))
	noProfile := kymaOutput(&operations.Kyma{Version: "2.0"})
	assert.Nil(t, noProfile.Profile)
}

func TestGardenerOutputRoundTrip(t *testing.T) {
	in := fullGardener()
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	out, err := gardenerOutput(raw)
	require.NoError(t, err)
	assert.Equal(t, &gqlschema.GardenerConfig{
		Name: ptr("c-full"), KubernetesVersion: ptr("1.31.2"), Provider: ptr("aws"), TargetSecret: ptr("aws-secret"),
		Region: ptr("eu-central-1"), MachineType: ptr("m6i.large"), MachineImage: ptr("gardenlinux"),
		MachineImageVersion: ptr("1592.1.0"), DiskType: ptr("gp3"), VolumeSizeGb: ptr(80), WorkerCidr: ptr("10.250.0.0/16"),
		AutoScalerMin: ptr(2), AutoScalerMax: ptr(10), MaxSurge: ptr(3), MaxUnavailable: ptr(0), Purpose: ptr("production"),
		LicenceType: ptr("partner"), EnableKubernetesVersionAutoUpdate: ptr(true), EnableMachineImageVersionAutoUpdate: ptr(false),
		ProviderSpecificConfig: &gqlschema.AWSProviderConfig{
			VpcCidr: ptr("10.250.0.0/16"), AWSZones: []*gqlschema.AWSZone{{
				Name: ptr("eu-central-1a"), WorkerCidr: ptr("10.250.0.0/19"), PublicCidr: ptr("10.250.32.0/20"), InternalCidr: ptr("10.250.48.0/20"),
			}},
		},
		Seed: ptr("aws-eu1"), ExposureClassName: ptr("internet"), EuAccess: ptr(true),
		OidcConfig: &gqlschema.OIDCConfig{ClientID: "kyma", IssuerURL: "https://issuer.example", GroupsClaim: "groups",
			SigningAlgs: []string{"RS256"}, UsernameClaim: "sub", UsernamePrefix: "-"},
		PodsCidr: ptr("100.64.0.0/12"), ServicesCidr: ptr("100.104.0.0/13"),
		DNSConfig: &gqlschema.DNSConfig{Domain: "full.example.com", Providers: []*gqlschema.DNSProvider{
			{DomainsInclude: []string{"full.example.com"}, Primary: true, SecretName: "dns-secret", Type: "aws-route53"},
		}},
		ShootNetworkingFilterDisabled: ptr(false), ControlPlaneFailureTolerance: ptr("zone"), ShootAndSeedSameRegion: ptr(true),
	}, out)

	// The output types' non-null fields are answered empty when the input left them unset.
	in = fullGardener()
	in.OidcConfig = &gqlschema.OIDCConfigInput{ClientID: "kyma", IssuerURL: "https://issuer.example"}
	in.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{OpenStackConfig: &gqlschema.OpenStackProviderConfigInput{
		Zones: []string{"eu-de-1a"}, LoadBalancerProvider: ptr("f5"),
	}}
	raw, err = json.Marshal(in)
	require.NoError(t, err)
	out, err = gardenerOutput(raw)
	require.NoError(t, err)
	assert.Equal(t, &gqlschema.OIDCConfig{ClientID: "kyma", IssuerURL: "https://issuer.example", SigningAlgs: []string{}}, out.OidcConfig)
	assert.Equal(t, &gqlschema.OpenStackProviderConfig{Zones: []string{"eu-de-1a"}, LoadBalancerProvider: "f5"}, out.ProviderSpecificConfig)

	none, err := gardenerOutput(nil)
	require.NoError(t, err)
	assert.Nil(t, none)
	_, err = gardenerOutput(json.RawMessage(`{"name": 5}`))
	require.ErrorContains(t, err, "decoding cluster configuration")
}

func TestProvisionRuntimeStoresWhatWasAsked(t *testing.T) {
	e := newTestEnv(t)
	in := validInput()
	st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, in)
	require.NoError(t, err)
	rt := e.runtime(*st.RuntimeID)
	assert.Equal(t, "my-runtime", rt.Name)
	assert.Equal(t, "simulated", rt.Backend)

	// Secret values are in the runtime's encrypted secrets only.
	assert.Equal(t, "hunter2", rt.Secrets["kyma/_global/global.password"])
	assert.Equal(t, "istio-private-key", rt.Secrets["kyma/istio/certificate.key"])
	op, err := e.store.Operations().GetOperation(e.ctx, *st.ID)
	require.NoError(t, err)
	for _, raw := range []string{string(rt.Config), string(op.Data)} {
		assert.NotContains(t, raw, "hunter2")
		assert.NotContains(t, raw, "istio-private-key")
	}

	cfg, err := operations.DecodeRuntimeConfig(rt)
	require.NoError(t, err)
	assert.Regexp(t, `^c-[0-9a-f]{7}$`, cfg.Cluster.Name, "a generated shoot name")
	assert.True(t, strings.HasPrefix(rt.ID, cfg.Cluster.Name[2:]))
	assert.Equal(t, "sub-1", cfg.SubAccountID)
	assert.Equal(t, "test", cfg.Description)
	assert.Equal(t, []string{"admin@example.com"}, cfg.Administrators)
	assert.Equal(t, "gcp", cfg.Cluster.Provider)
	assert.Equal(t, 50, cfg.Cluster.VolumeSizeGB)
	var g gqlschema.GardenerConfigInput
	require.NoError(t, json.Unmarshal(cfg.Gardener, &g))
	assert.Equal(t, cfg.Cluster.Name, *g.Name, "the stored Gardener configuration names the generated shoot")

	var data operations.Data
	require.NoError(t, json.Unmarshal(op.Data, &data))
	assert.Equal(t, operations.Data{RuntimeID: rt.ID, Tenant: testTenant, Backend: "simulated", Config: cfg}, data)
	assert.Equal(t, operations.TypeProvision, op.Type)
	assert.Equal(t, rt.ID, op.InstanceID)
	assert.Equal(t, time.Hour, op.Deadline.Sub(op.CreatedAt))

	// The API shows the configuration with the secrets masked.
	status, err := e.svc.RuntimeStatus(e.ctx, testTenant, rt.ID)
	require.NoError(t, err)
	kc := status.RuntimeConfiguration.KymaConfig
	require.NotNil(t, kc)
	assert.Equal(t, "***", kc.Configuration[1].Value)
	assert.Equal(t, "example.com", kc.Configuration[0].Value)
	assert.Equal(t, "***", kc.Components[0].Configuration[1].Value)
	assert.Equal(t, cfg.Cluster.Name, *status.RuntimeConfiguration.ClusterConfig.Name)
	require.IsType(t, &gqlschema.GCPProviderConfig{}, status.RuntimeConfiguration.ClusterConfig.ProviderSpecificConfig)
	assert.Equal(t, "europe-west3-a", status.RuntimeConfiguration.ClusterConfig.ProviderSpecificConfig.(*gqlschema.GCPProviderConfig).Zones[0])
	assert.Nil(t, status.RuntimeConfiguration.Kubeconfig)
}

func TestUpgradesChangeTheOperationsConfiguration(t *testing.T) {
	e := newTestEnv(t)
	id := e.provision(validInput())

	t.Run("upgradeShoot merges into the current cluster configuration", func(t *testing.T) {
		st, err := e.svc.UpgradeShoot(e.ctx, testTenant, id, gqlschema.UpgradeShootInput{
			GardenerConfig: &gqlschema.GardenerUpgradeInput{MachineType: ptr("n2-standard-8"), AutoScalerMax: ptr(6)},
			Administrators: []string{"new-admin@example.com"},
		})
		require.NoError(t, err)
		op, err := e.store.Operations().GetOperation(e.ctx, *st.ID)
		require.NoError(t, err)
		var data operations.Data
		require.NoError(t, json.Unmarshal(op.Data, &data))
		assert.Equal(t, "n2-standard-8", data.Config.Cluster.MachineType)
		assert.Equal(t, 6, data.Config.Cluster.AutoScalerMax)
		assert.Equal(t, 1, data.Config.Cluster.AutoScalerMin)
		assert.Equal(t, "europe-west3", data.Config.Cluster.Region)
		assert.Equal(t, []string{"new-admin@example.com"}, data.Config.Administrators)
		var g gqlschema.GardenerConfigInput
		require.NoError(t, json.Unmarshal(data.Config.Gardener, &g))
		assert.Equal(t, "n2-standard-8", g.MachineType)
		assert.Equal(t, "pd-ssd", *g.DiskType)
		// The runtime's configuration changes only when the upgrade is done.
		cfg, err := operations.DecodeRuntimeConfig(e.runtime(id))
		require.NoError(t, err)
		assert.Equal(t, "n2-standard-4", cfg.Cluster.MachineType)
		e.finish(*st.ID, storage.StateSucceeded, nil)
	})

	t.Run("upgradeRuntime replaces Kyma and stores new secret values", func(t *testing.T) {
		k := validKyma()
		k.Version = "2.21.0"
		k.Configuration[1].Value = "new-password"
		st, err := e.svc.UpgradeRuntime(e.ctx, testTenant, id, gqlschema.UpgradeRuntimeInput{KymaConfig: k})
		require.NoError(t, err)
		assert.Equal(t, gqlschema.OperationTypeUpgrade, st.Operation)
		op, err := e.store.Operations().GetOperation(e.ctx, *st.ID)
		require.NoError(t, err)
		assert.NotContains(t, string(op.Data), "new-password")
		var data operations.Data
		require.NoError(t, json.Unmarshal(op.Data, &data))
		assert.Equal(t, "2.21.0", data.Config.Kyma.Version)
		assert.Equal(t, "new-password", e.runtime(id).Secrets["kyma/_global/global.password"])
		assert.Equal(t, "istio-private-key", e.runtime(id).Secrets["kyma/istio/certificate.key"])
	})
}
