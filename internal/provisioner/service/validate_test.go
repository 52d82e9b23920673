package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireBadRequest asserts err is a BAD_REQUEST naming field.
func requireBadRequest(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err)
	assert.Equal(t, apperr.CodeBadRequest, apperr.CodeOf(err), "%v", err)
	var ae *apperr.Error
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, field, ae.Field, "%v", err)
	assert.NotEmpty(t, ae.Reason)
}

const gf = "config.clusterConfig.gardenerConfig"
const psc = gf + ".providerSpecificConfig"

func TestProvisionRuntimeValidation(t *testing.T) {
	e := newTestEnv(t)
	type in = gqlschema.ProvisionRuntimeInput
	gardener := func(f func(g *gqlschema.GardenerConfigInput)) func(*in) {
		return func(i *in) { f(i.ClusterConfig.GardenerConfig) }
	}
	aws := func(f func(a *gqlschema.AWSProviderConfigInput)) func(*in) {
		return func(i *in) {
			g := i.ClusterConfig.GardenerConfig
			g.Provider = "aws"
			a := &gqlschema.AWSProviderConfigInput{VpcCidr: "10.250.0.0/16", AWSZones: []*gqlschema.AWSZoneInput{{
				Name: "eu-central-1a", WorkerCidr: "10.250.0.0/19", PublicCidr: "10.250.32.0/20", InternalCidr: "10.250.48.0/20",
			}}}
			f(a)
			g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AWSConfig: a}
		}
	}
	kyma := func(f func(k *gqlschema.KymaConfigInput)) func(*in) { return func(i *in) { f(i.KymaConfig) } }

	for _, tc := range []struct {
		name   string
		tenant string
		change func(*in)
		field  string
	}{
		{name: "missing tenant", tenant: "", change: func(*in) {}, field: "tenant"},
		{name: "no runtime input", change: func(i *in) { i.RuntimeInput = nil }, field: "config.runtimeInput"},
		{name: "empty name", change: func(i *in) { i.RuntimeInput.Name = "" }, field: "config.runtimeInput.name"},
		{name: "blank name", change: func(i *in) { i.RuntimeInput.Name = "   " }, field: "config.runtimeInput.name"},
		{name: "name with a leading dash", change: func(i *in) { i.RuntimeInput.Name = "-bad" }, field: "config.runtimeInput.name"},
		{name: "name with an underscore", change: func(i *in) { i.RuntimeInput.Name = "bad_name" }, field: "config.runtimeInput.name"},
		{name: "name too long", change: func(i *in) { i.RuntimeInput.Name = strings.Repeat("a", 65) }, field: "config.runtimeInput.name"},
		{name: "no cluster config", change: func(i *in) { i.ClusterConfig = nil }, field: gf},
		{name: "no gardener config", change: func(i *in) { i.ClusterConfig.GardenerConfig = nil }, field: gf},
		{name: "empty administrator", change: func(i *in) { i.ClusterConfig.Administrators = []string{"a@example.com", " "} },
			field: "config.clusterConfig.administrators[1]"},
		{name: "cluster name not a DNS label", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.Name = ptr("Bad_Name") }), field: gf + ".name"},
		{name: "cluster name too long", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.Name = ptr(strings.Repeat("a", 22)) }), field: gf + ".name"},
		{name: "kubernetes version", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.KubernetesVersion = "latest" }), field: gf + ".kubernetesVersion"},
		{name: "unknown provider", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.Provider = "alicloud" }), field: gf + ".provider"},
		{name: "no target secret", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.TargetSecret = " " }), field: gf + ".targetSecret"},
		{name: "no region", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.Region = "" }), field: gf + ".region"},
		{name: "no machine type", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.MachineType = "" }), field: gf + ".machineType"},
		{name: "worker CIDR", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.WorkerCidr = "10.250.0.0" }), field: gf + ".workerCidr"},
		{name: "autoscaler min below 1", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.AutoScalerMin = 0 }), field: gf + ".autoScalerMin"},
		{name: "autoscaler min above max", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.AutoScalerMin, g.AutoScalerMax = 4, 3 }),
			field: gf + ".autoScalerMin"},
		{name: "negative max surge", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.MaxSurge = -1 }), field: gf + ".maxSurge"},
		{name: "negative max unavailable", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.MaxUnavailable = -1 }), field: gf + ".maxUnavailable"},
		{name: "volume size", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.VolumeSizeGb = ptr(0) }), field: gf + ".volumeSizeGB"},
		{name: "no provider config", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.ProviderSpecificConfig = nil }), field: psc},
		{name: "provider config of another provider", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{VnetCidr: "10.250.0.0/16"}}
		}), field: psc + ".gcpConfig"},
		{name: "a second provider config", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.ProviderSpecificConfig.OpenStackConfig = &gqlschema.OpenStackProviderConfigInput{Zones: []string{"z"}}
		}), field: psc + ".openStackConfig"},
		{name: "gcp without zones", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.ProviderSpecificConfig.GCPConfig.Zones = nil }),
			field: psc + ".gcpConfig.zones"},
		{name: "openstack without zones", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.Provider = "openstack"
			g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{OpenStackConfig: &gqlschema.OpenStackProviderConfigInput{}}
		}), field: psc + ".openStackConfig.zones"},
		{name: "azure vnet CIDR", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.Provider = "azure"
			g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{VnetCidr: "vnet"}}
		}), field: psc + ".azureConfig.vnetCidr"},
		{name: "azure zone number", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.Provider = "azure"
			g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{
				VnetCidr: "10.250.0.0/16", AzureZones: []*gqlschema.AzureZoneInput{{Name: 1, Cidr: "10.250.0.0/19"}, {Name: 0, Cidr: "10.250.32.0/19"}},
			}}
		}), field: psc + ".azureConfig.azureZones[1].name"},
		{name: "azure zone CIDR", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.Provider = "azure"
			g.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{
				VnetCidr: "10.250.0.0/16", AzureZones: []*gqlschema.AzureZoneInput{{Name: 1, Cidr: "zone-1"}},
			}}
		}), field: psc + ".azureConfig.azureZones[0].cidr"},
		{name: "pods CIDR", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.PodsCidr = ptr("pods") }), field: gf + ".podsCidr"},
		{name: "services CIDR", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.ServicesCidr = ptr("10.0.0.0/40") }), field: gf + ".servicesCidr"},
		{name: "control plane failure tolerance", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.ControlPlaneFailureTolerance = ptr("region") }),
			field: gf + ".controlPlaneFailureTolerance"},
		{name: "DNS without domain", change: gardener(func(g *gqlschema.GardenerConfigInput) { g.DNSConfig = &gqlschema.DNSConfigInput{Domain: " "} }),
			field: gf + ".dnsConfig.domain"},
		{name: "DNS provider null", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.DNSConfig = &gqlschema.DNSConfigInput{Domain: "a.example.com", Providers: []*gqlschema.DNSProviderInput{nil}}
		}), field: gf + ".dnsConfig.providers[0]"},
		{name: "DNS provider without secret", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.DNSConfig = &gqlschema.DNSConfigInput{Domain: "a.example.com", Providers: []*gqlschema.DNSProviderInput{{Type: "aws-route53"}}}
		}), field: gf + ".dnsConfig.providers[0].secretName"},
		{name: "aws zone null", change: aws(func(a *gqlschema.AWSProviderConfigInput) { a.AWSZones = append(a.AWSZones, nil) }),
			field: psc + ".awsConfig.awsZones[1]"},
		{name: "aws vpc CIDR", change: aws(func(a *gqlschema.AWSProviderConfigInput) { a.VpcCidr = "" }), field: psc + ".awsConfig.vpcCidr"},
		{name: "aws without zones", change: aws(func(a *gqlschema.AWSProviderConfigInput) { a.AWSZones = nil }), field: psc + ".awsConfig.awsZones"},
		{name: "aws zone worker CIDR", change: aws(func(a *gqlschema.AWSProviderConfigInput) { a.AWSZones[0].WorkerCidr = "x" }),
			field: psc + ".awsConfig.awsZones[0].workerCidr"},
		{name: "aws zone public CIDR", change: aws(func(a *gqlschema.AWSProviderConfigInput) { a.AWSZones[0].PublicCidr = "10.0.0.1/33" }),
			field: psc + ".awsConfig.awsZones[0].publicCidr"},
		{name: "aws zone internal CIDR", change: aws(func(a *gqlschema.AWSProviderConfigInput) {
			a.AWSZones = append(a.AWSZones, &gqlschema.AWSZoneInput{Name: "b", WorkerCidr: "10.1.0.0/19", PublicCidr: "10.1.32.0/20"})
		}), field: psc + ".awsConfig.awsZones[1].internalCidr"},
		{name: "OIDC without client ID", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.OidcConfig = &gqlschema.OIDCConfigInput{IssuerURL: "https://issuer.example"}
		}), field: gf + ".oidcConfig.clientID"},
		{name: "OIDC issuer not https", change: gardener(func(g *gqlschema.GardenerConfigInput) {
			g.OidcConfig = &gqlschema.OIDCConfigInput{ClientID: "c", IssuerURL: "http://issuer.example"}
		}), field: gf + ".oidcConfig.issuerURL"},
		{name: "kyma version", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Version = " " }), field: "config.kymaConfig.version"},
		{name: "nil component", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Components[1] = nil }),
			field: "config.kymaConfig.components[1].component"},
		{name: "component without name", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Components[0].Component = "" }),
			field: "config.kymaConfig.components[0].component"},
		{name: "component without namespace", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Components[1].Namespace = "" }),
			field: "config.kymaConfig.components[1].namespace"},
		{name: "duplicate component", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Components[1].Component = "istio" }),
			field: "config.kymaConfig.components[1].component"},
		{name: "component entry without key", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Components[0].Configuration[1].Key = "" }),
			field: "config.kymaConfig.components[0].configuration[1].key"},
		{name: "nil global entry", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Configuration[0] = nil }),
			field: "config.kymaConfig.configuration[0].key"},
		{name: "global entry without key", change: kyma(func(k *gqlschema.KymaConfigInput) { k.Configuration[1].Key = " " }),
			field: "config.kymaConfig.configuration[1].key"},
		{name: "unknown backend", change: func(i *in) { i.RuntimeInput.Labels[BackendLabel] = "gardener-eu" },
			field: "config.runtimeInput.labels." + BackendLabel},
		{name: "empty backend label", change: func(i *in) { i.RuntimeInput.Labels[BackendLabel] = "" },
			field: "config.runtimeInput.labels." + BackendLabel},
		{name: "backend label not a string", change: func(i *in) { i.RuntimeInput.Labels[BackendLabel] = 5.0 },
			field: "config.runtimeInput.labels." + BackendLabel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := validInput()
			tc.change(&input)
			tenant := testTenant
			if tc.name == "missing tenant" {
				tenant = tc.tenant
			}
			st, err := e.svc.ProvisionRuntime(e.ctx, tenant, input)
			requireBadRequest(t, err, tc.field)
			assert.Nil(t, st)
		})
	}

	page, err := e.store.Runtimes().ListRuntimes(e.ctx, storage.RuntimeFilter{IncludeDeleted: true})
	require.NoError(t, err)
	assert.Zero(t, page.TotalCount, "no invalid request stored a runtime")
	ops, err := e.store.Operations().ListOperations(e.ctx, storage.OperationFilter{})
	require.NoError(t, err)
	assert.Zero(t, ops.TotalCount)
}

func TestProvisionRuntimeAcceptsValidVariants(t *testing.T) {
	e := newTestEnv(t)
	for name, change := range map[string]func(*gqlschema.ProvisionRuntimeInput){
		"as given":            func(*gqlschema.ProvisionRuntimeInput) {},
		"without Kyma":        func(i *gqlschema.ProvisionRuntimeInput) { i.KymaConfig = nil },
		"upper-case provider": func(i *gqlschema.ProvisionRuntimeInput) { i.ClusterConfig.GardenerConfig.Provider = "GCP" },
		"named cluster":       func(i *gqlschema.ProvisionRuntimeInput) { i.ClusterConfig.GardenerConfig.Name = ptr("c-abc") },
		"backend named":       func(i *gqlschema.ProvisionRuntimeInput) { i.RuntimeInput.Labels[BackendLabel] = "simulated" },
		"no labels":           func(i *gqlschema.ProvisionRuntimeInput) { i.RuntimeInput.Labels = nil },
		"min equals max":      func(i *gqlschema.ProvisionRuntimeInput) { i.ClusterConfig.GardenerConfig.AutoScalerMax = 1 },
		"no administrators":   func(i *gqlschema.ProvisionRuntimeInput) { i.ClusterConfig.Administrators = nil },
		"64 character name":   func(i *gqlschema.ProvisionRuntimeInput) { i.RuntimeInput.Name = strings.Repeat("a", 64) },
		"kubernetes x.y.z":    func(i *gqlschema.ProvisionRuntimeInput) { i.ClusterConfig.GardenerConfig.KubernetesVersion = "1.31.2" },
		"https OIDC with a client": func(i *gqlschema.ProvisionRuntimeInput) {
			i.ClusterConfig.GardenerConfig.OidcConfig = &gqlschema.OIDCConfigInput{ClientID: "c", IssuerURL: "https://issuer.example"}
		},
		"azure": func(i *gqlschema.ProvisionRuntimeInput) {
			i.ClusterConfig.GardenerConfig.Provider = "azure"
			i.ClusterConfig.GardenerConfig.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{
				AzureConfig: &gqlschema.AzureProviderConfigInput{VnetCidr: "10.250.0.0/16"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			input := validInput()
			change(&input)
			st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, input)
			require.NoError(t, err)
			require.NotNil(t, st.RuntimeID)
			rt := e.runtime(*st.RuntimeID)
			assert.Equal(t, "simulated", rt.Backend)
			assert.Equal(t, testTenant, rt.Tenant)
		})
	}
}

func TestUpgradeRuntimeValidation(t *testing.T) {
	e := newTestEnv(t)
	id := e.provision(validInput())
	kyma := func(f func(k *gqlschema.KymaConfigInput)) gqlschema.UpgradeRuntimeInput {
		k := validKyma()
		f(k)
		return gqlschema.UpgradeRuntimeInput{KymaConfig: k}
	}
	for name, tc := range map[string]struct {
		in    gqlschema.UpgradeRuntimeInput
		field string
	}{
		"no kyma config":       {gqlschema.UpgradeRuntimeInput{}, "config.kymaConfig"},
		"no version":           {kyma(func(k *gqlschema.KymaConfigInput) { k.Version = "" }), "config.kymaConfig.version"},
		"duplicate components": {kyma(func(k *gqlschema.KymaConfigInput) { k.Components[0].Component = "serverless" }), "config.kymaConfig.components[1].component"},
		"entry without key":    {kyma(func(k *gqlschema.KymaConfigInput) { k.Configuration[0].Key = "" }), "config.kymaConfig.configuration[0].key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.svc.UpgradeRuntime(e.ctx, testTenant, id, tc.in)
			requireBadRequest(t, err, tc.field)
		})
	}

	t.Run("no components is a Kyma without modules", func(t *testing.T) {
		k := validKyma()
		k.Components = nil
		assert.NoError(t, validateKyma("config.kymaConfig", k))
	})

	t.Run("a runtime provisioned without Kyma cannot be upgraded", func(t *testing.T) {
		in := validInput()
		in.KymaConfig = nil
		noKyma := e.provision(in)
		up := validKyma()
		up.Components[0].Configuration[1].Value = "new-private-key"
		_, err := e.svc.UpgradeRuntime(e.ctx, testTenant, noKyma, gqlschema.UpgradeRuntimeInput{KymaConfig: up})
		requireBadRequest(t, err, "config.kymaConfig")
		assert.Empty(t, e.runtime(noKyma).Secrets, "a rejected upgrade stores no secrets")
	})

	t.Run("a rejected upgrade leaves the runtime's secrets as they were", func(t *testing.T) {
		// The provisioning is still running: the upgrade is a conflict.
		st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, validInput())
		require.NoError(t, err)
		up := validKyma()
		up.Configuration[1].Value = "changed-password"
		_, err = e.svc.UpgradeRuntime(e.ctx, testTenant, *st.RuntimeID, gqlschema.UpgradeRuntimeInput{KymaConfig: up})
		require.Error(t, err)
		assert.Equal(t, apperr.CodeConflict, apperr.CodeOf(err))
		assert.Equal(t, "hunter2", e.runtime(*st.RuntimeID).Secrets["kyma/_global/global.password"])
	})

	t.Run("unknown runtime", func(t *testing.T) {
		_, err := e.svc.UpgradeRuntime(e.ctx, testTenant, "nope", gqlschema.UpgradeRuntimeInput{KymaConfig: validKyma()})
		assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))
	})
}

func TestUpgradeShootValidation(t *testing.T) {
	e := newTestEnv(t)
	id := e.provision(validInput()) // autoScalerMin 1, autoScalerMax 3, provider gcp
	const f = "config.gardenerConfig"
	up := func(change func(u *gqlschema.GardenerUpgradeInput)) gqlschema.UpgradeShootInput {
		u := &gqlschema.GardenerUpgradeInput{}
		change(u)
		return gqlschema.UpgradeShootInput{GardenerConfig: u}
	}
	for name, tc := range map[string]struct {
		in    gqlschema.UpgradeShootInput
		field string
	}{
		"no gardener config":  {gqlschema.UpgradeShootInput{}, f},
		"empty administrator": {gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{}, Administrators: []string{""}}, "config.administrators[0]"},
		"kubernetes version":  {up(func(u *gqlschema.GardenerUpgradeInput) { u.KubernetesVersion = ptr("v1.32") }), f + ".kubernetesVersion"},
		// Limits are checked on the merged configuration.
		"new max below the current min": {up(func(u *gqlschema.GardenerUpgradeInput) { u.AutoScalerMax = ptr(0) }), f + ".autoScalerMin"},
		"new min above the new max":     {up(func(u *gqlschema.GardenerUpgradeInput) { u.AutoScalerMin = ptr(5); u.AutoScalerMax = ptr(4) }), f + ".autoScalerMin"},
		"new min above the current max": {up(func(u *gqlschema.GardenerUpgradeInput) { u.AutoScalerMin = ptr(4) }), f + ".autoScalerMin"},
		"min below 1":                   {up(func(u *gqlschema.GardenerUpgradeInput) { u.AutoScalerMin = ptr(0) }), f + ".autoScalerMin"},
		"negative max surge":            {up(func(u *gqlschema.GardenerUpgradeInput) { u.MaxSurge = ptr(-1) }), f + ".maxSurge"},
		"negative max unavailable":      {up(func(u *gqlschema.GardenerUpgradeInput) { u.MaxUnavailable = ptr(-2) }), f + ".maxUnavailable"},
		"volume size":                   {up(func(u *gqlschema.GardenerUpgradeInput) { u.VolumeSizeGb = ptr(0) }), f + ".volumeSizeGB"},
		"provider config of another provider": {up(func(u *gqlschema.GardenerUpgradeInput) {
			u.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{VpcCidr: "10.0.0.0/16"}}
		}), f + ".providerSpecificConfig.gcpConfig"},
		"gcp without zones": {up(func(u *gqlschema.GardenerUpgradeInput) {
			u.ProviderSpecificConfig = &gqlschema.ProviderSpecificInput{GCPConfig: &gqlschema.GCPProviderConfigInput{}}
		}), f + ".providerSpecificConfig.gcpConfig.zones"},
		"OIDC issuer": {up(func(u *gqlschema.GardenerUpgradeInput) {
			u.OidcConfig = &gqlschema.OIDCConfigInput{ClientID: "c", IssuerURL: "issuer.example"}
		}), f + ".oidcConfig.issuerURL"},
		"OIDC client": {up(func(u *gqlschema.GardenerUpgradeInput) {
			u.OidcConfig = &gqlschema.OIDCConfigInput{IssuerURL: "https://issuer.example"}
		}), f + ".oidcConfig.clientID"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.svc.UpgradeShoot(e.ctx, testTenant, id, tc.in)
			requireBadRequest(t, err, tc.field)
		})
	}

	// Nothing was started by the rejected requests.
	ops, err := e.store.Operations().ListOperations(e.ctx, storage.OperationFilter{InstanceIDs: []string{id}})
	require.NoError(t, err)
	assert.Equal(t, 1, ops.TotalCount)

	t.Run("a new max equal to the current min is fine", func(t *testing.T) {
		st, err := e.svc.UpgradeShoot(e.ctx, testTenant, id, up(func(u *gqlschema.GardenerUpgradeInput) { u.AutoScalerMax = ptr(1) }))
		require.NoError(t, err)
		assert.Equal(t, gqlschema.OperationTypeUpgradeShoot, st.Operation)
	})
}
