package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/resources"
)

const (
	azureID      = "4deee563-e5ec-4731-b9b1-53b42d855f0c"
	awsID        = "361c511f-f939-4621-b228-d0fb79a1fe15"
	gcpID        = "ca6e5357-707f-4565-bbbd-b3ab732597c6"
	azureLiteID  = "8cb22518-aa26-44c5-91a0-e669ec9bf443"
	trialID      = "7d55d31d-35ae-4438-bf13-6ffdfa107d9f"
	freeID       = "b1a5764e-2ea1-4f95-94c0-2b4538b37b55"
	openstackID  = "03b812ac-c991-4528-b5bd-08b303523a63"
	previewID    = "5cb3d976-b85c-42ea-a636-79cadda109a9"
	ownClusterID = "03e3cb66-a4c6-4c6a-b4b0-5d42224debea"
	awsHAID      = "aecef2e6-49f1-4094-8433-eba0e135eb6a"
	azureHAID    = "f2951649-02ca-43a5-9188-9c07fb612491"
	serviceID    = "47c9dcbf-ff30-448e-ab36-d3bad66ba281"
)

func defaultCatalog(t testing.TB) *Catalog {
	t.Helper()
	c, err := FromConfig(Config{})
	require.NoError(t, err)
	return c
}

func TestPlanIDsAreExact(t *testing.T) {
	c := defaultCatalog(t)
	want := map[string]string{
		"azure": azureID, "aws": awsID, "gcp": gcpID, "azure_lite": azureLiteID, "trial": trialID,
		"free": freeID, "sap-converged-cloud": openstackID, "openstack": openstackID, "preview": previewID,
		"own_cluster": ownClusterID, "aws_ha": awsHAID, "azure_ha": azureHAID,
	}
	for name, id := range want {
		p, ok := c.PlanByName(name)
		require.True(t, ok, name)
		assert.Equal(t, id, p.ID, name)
		byID, ok := c.Plan(id)
		require.True(t, ok, name)
		assert.Equal(t, p.Name, byID.Name)
	}
	assert.Len(t, c.Plans(), 11)
	assert.Equal(t, serviceID, c.ServiceID())
	_, ok := c.Plan("nope")
	assert.False(t, ok)
}

func TestPlanReturnsACopy(t *testing.T) {
	c := defaultCatalog(t)
	p, _ := c.Plan(awsID)
	p.Providers["aws"] = PlanProvider{}
	p.UpgradableTo[0] = "x"
	again, _ := c.Plan(awsID)
	assert.NotEmpty(t, again.Providers["aws"].MachineTypes)
	assert.Equal(t, []string{"aws_ha"}, again.UpgradableTo)
}

func TestPlanData(t *testing.T) {
	c := defaultCatalog(t)
	trial, _ := c.Plan(trialID)
	assert.True(t, trial.Trial)
	assert.True(t, trial.Free)
	assert.Equal(t, 14, trial.ExpiryDays)
	assert.True(t, trial.RegionOptional)
	free, _ := c.Plan(freeID)
	assert.Equal(t, 30, free.ExpiryDays)
	assert.False(t, free.Trial)
	aws, _ := c.Plan(awsID)
	assert.Equal(t, AutoScaler{Min: 3, Max: 20, LowerBound: 3, UpperBound: 300}, aws.AutoScaler)
	assert.Equal(t, "m6i.large", aws.Providers["aws"].DefaultMachineType)
	assert.Equal(t, "1.33", aws.KubernetesVersion)
	assert.False(t, aws.Free)
	ha, _ := c.Plan(awsHAID)
	assert.Equal(t, 3, ha.ZonesCount)
	// regions default to the provider's list
	assert.Contains(t, aws.Providers["aws"].Regions, "eu-central-1")
	gcp, _ := c.Plan(gcpID)
	assert.Equal(t, "n2-standard-2", gcp.Providers["gcp"].DefaultMachineType)
	d := c.Defaults()
	assert.Equal(t, Networking{Nodes: "10.250.0.0/16", Pods: "10.96.0.0/13", Services: "10.104.0.0/13"}, d.Networking)
}

func TestEnabledPlans(t *testing.T) {
	c := defaultCatalog(t)
	var names []string
	for _, p := range c.EnabledPlans() {
		names = append(names, p.Name)
	}
	assert.ElementsMatch(t, []string{"azure", "aws", "gcp", "azure_lite", "trial", "free", "sap-converged-cloud", "aws_ha", "azure_ha"}, names)
	assert.False(t, c.Enabled(ownClusterID))
	assert.False(t, c.Enabled(previewID))
	assert.True(t, c.Enabled(awsID))

	t.Run("config overrides the file", func(t *testing.T) {
		c, err := FromConfig(Config{EnabledPlans: []string{" aws", "own_cluster ", "", "openstack"}})
		require.NoError(t, err)
		assert.Equal(t, []string{"aws", "sap-converged-cloud", "own_cluster"}, planNames(c.Services("cf-eu01")))
		_, err = c.ValidateProvision(gcpID, "", json.RawMessage(`{"name":"x","region":"us-central1"}`), btpContext())
		assertFieldError(t, err, "plan_id", "unknown plan")
	})
	t.Run("empty config keeps the file's list", func(t *testing.T) {
		c, err := FromConfig(Config{EnabledPlans: []string{" "}})
		require.NoError(t, err)
		assert.Len(t, c.EnabledPlans(), 9)
	})
	t.Run("unknown plan in config", func(t *testing.T) {
		_, err := FromConfig(Config{EnabledPlans: []string{"aws", "nope"}})
		assertFieldError(t, err, "enabled_plans[1]", `"nope" is not defined`)
	})
	t.Run("by ID", func(t *testing.T) {
		c2, err := c.WithEnabledPlans([]string{trialID})
		require.NoError(t, err)
		assert.Equal(t, []string{"trial"}, planNames(c2.Services("")))
		// the original is untouched
		assert.Len(t, c.EnabledPlans(), 9)
	})
	t.Run("none enabled gives no service", func(t *testing.T) {
		c2, err := c.WithEnabledPlans(nil)
		require.NoError(t, err)
		assert.Empty(t, c2.Services(""))
	})
}

func planNames(services []domain.Service) []string {
	var out []string
	for _, s := range services {
		for _, p := range s.Plans {
			out = append(out, p.Name)
		}
	}
	return out
}

func findPlan(t *testing.T, services []domain.Service, name string) domain.ServicePlan {
	t.Helper()
	require.Len(t, services, 1)
	for _, p := range services[0].Plans {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("plan %s not in catalog %v", name, planNames(services))
	return domain.ServicePlan{}
}

func regionEnum(t *testing.T, p domain.ServicePlan) []string {
	t.Helper()
	props := p.Schemas.Instance.Create.Parameters["properties"].(map[string]any)
	region, ok := props["region"].(map[string]any)
	require.True(t, ok, "plan %s has no region property", p.Name)
	return region["enum"].([]string)
}

func TestServicesPerPlatformRegion(t *testing.T) {
	c := defaultCatalog(t)
	cases := []struct {
		platformRegion, plan string
		want                 []string
	}{
		{"cf-eu10", "trial", []string{"eu-central-1", "us-east-1", "ap-southeast-1"}},
		{"", "trial", []string{"eu-central-1", "us-east-1", "ap-southeast-1"}},
		{"cf-eu20", "trial", []string{"westeurope", "eastus", "australiaeast"}},
		{"cf-us30", "trial", []string{"europe-west3", "us-central1", "asia-south1"}},
		{"cf-eu01", "trial", []string{"eu-central-1", "us-east-1", "ap-southeast-1"}}, // openstack: fallback aws
		{"cf-eu11", "trial", []string{"eu-central-1"}},
		{"cf-eu20", "free", c.providers["azure"].Regions},
		{"cf-us30", "free", c.providers["aws"].Regions}, // gcp not offered: fallback aws
		{"cf-eu11", "aws", []string{"eu-central-1"}},
		{"cf-eu10", "aws", c.providers["aws"].Regions},
		{"cf-eu11", "azure", []string{"westeurope", "northeurope", "francecentral"}},
		{"cf-ch20", "azure", []string{"switzerlandnorth"}},
		{"cf-ch20", "azure_lite", []string{"switzerlandnorth"}},
		{"cf-sa30", "gcp", []string{"me-central2"}},
		{"cf-eu01", "sap-converged-cloud", []string{"eu-de-1", "eu-de-2", "eu-nl-1"}},
		{"cf-jp01", "sap-converged-cloud", []string{"ap-jp-1"}},
		{"cf-eu10", "sap-converged-cloud", c.providers["openstack"].Regions},
	}
	for _, tc := range cases {
		t.Run(tc.platformRegion+"/"+tc.plan, func(t *testing.T) {
			p := findPlan(t, c.Services(tc.platformRegion), tc.plan)
			assert.Equal(t, tc.want, regionEnum(t, p))
		})
	}
}

func TestServiceOffering(t *testing.T) {
	c := defaultCatalog(t)
	services := c.Services("cf-eu10")
	require.Len(t, services, 1)
	s := services[0]
	assert.Equal(t, serviceID, s.ID)
	assert.Equal(t, "kymaruntime", s.Name)
	assert.True(t, s.Bindable)
	assert.True(t, s.InstancesRetrievable)
	assert.True(t, s.PlanUpdatable)
	assert.True(t, s.AllowContextUpdates)
	assert.Equal(t, "Kyma Runtime", s.Metadata.DisplayName)
	assert.Equal(t, []string{"azure", "aws", "gcp", "azure_lite", "trial", "free", "sap-converged-cloud", "aws_ha", "azure_ha"}, planNames(services))

	aws := findPlan(t, services, "aws")
	assert.Equal(t, awsID, aws.ID)
	assert.False(t, *aws.Free)
	assert.True(t, *aws.PlanUpdatable)
	assert.Equal(t, "Amazon Web Services", aws.Metadata.DisplayName)
	trial := findPlan(t, services, "trial")
	assert.True(t, *trial.Free)
	assert.False(t, *trial.PlanUpdatable)

	raw, err := json.Marshal(services)
	require.NoError(t, err)
	var generic []map[string]any
	require.NoError(t, json.Unmarshal(raw, &generic))
	assert.Equal(t, true, generic[0]["allow_context_updates"])
	assert.Equal(t, true, generic[0]["instances_retrievable"])
	assert.Equal(t, true, generic[0]["plan_updateable"])
	for _, p := range s.Plans {
		for _, sch := range []map[string]any{p.Schemas.Instance.Create.Parameters, p.Schemas.Instance.Update.Parameters} {
			assert.Equal(t, SchemaDraft, sch["$schema"], p.Name)
			b, err := json.Marshal(sch)
			require.NoError(t, err)
			assert.Less(t, len(b), 64*1024, "OSB: schemas must not be larger than 64kB")
		}
	}
}

func TestSchemaContents(t *testing.T) {
	c := defaultCatalog(t)
	aws := findPlan(t, c.Services("cf-eu10"), "aws")
	create := aws.Schemas.Instance.Create.Parameters
	assert.Equal(t, []string{"name", "region"}, create["required"])
	assert.Equal(t, false, create["additionalProperties"])
	props := create["properties"].(map[string]any)
	for _, k := range []string{"name", "region", "machineType", "autoScalerMin", "autoScalerMax", "oidc", "administrators", "networking", "modules", "kymaVersion"} {
		assert.Contains(t, props, k)
	}
	name := props["name"].(map[string]any)
	assert.Equal(t, `^[a-zA-Z0-9-]*$`, name["pattern"])
	assert.Equal(t, 1, name["minLength"])
	assert.Equal(t, 64, name["maxLength"])
	assert.Equal(t, "m6i.large", props["machineType"].(map[string]any)["default"])
	assert.Equal(t, 3, props["autoScalerMin"].(map[string]any)["default"])
	assert.Equal(t, 20, props["autoScalerMax"].(map[string]any)["default"])
	nw := props["networking"].(map[string]any)["properties"].(map[string]any)
	assert.Equal(t, "10.250.0.0/16", nw["nodes"].(map[string]any)["default"])
	assert.Equal(t, "10.96.0.0/13", nw["pods"].(map[string]any)["default"])
	assert.Equal(t, "10.104.0.0/13", nw["services"].(map[string]any)["default"])

	update := aws.Schemas.Instance.Update.Parameters
	uprops := update["properties"].(map[string]any)
	assert.ElementsMatch(t, []string{"machineType", "autoScalerMin", "autoScalerMax", "oidc", "administrators", "modules"}, keys(uprops))

	trial := findPlan(t, c.Services("cf-eu10"), "trial")
	tprops := trial.Schemas.Instance.Create.Parameters["properties"].(map[string]any)
	assert.Equal(t, []string{"name"}, trial.Schemas.Instance.Create.Parameters["required"])
	assert.NotContains(t, tprops, "machineType")
	assert.NotContains(t, tprops, "autoScalerMin")
	assert.Equal(t, "eu-central-1", tprops["region"].(map[string]any)["default"])

	own, err := c.CreateSchema(ownClusterID, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"name", "kubeconfig", "shootName", "shootDomain"}, own["required"])
	assert.NotContains(t, own["properties"], "region")
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Every generated schema compiles (the compiler checks it against the
// draft-07 meta-schema) for every plan and a range of platform regions.
func TestGeneratedSchemasCompile(t *testing.T) {
	c := defaultCatalog(t)
	for _, pr := range []string{"", "cf-eu10", "cf-eu11", "cf-eu20", "cf-ch20", "cf-us30", "cf-sa30", "cf-eu01", "cf-jp01", "cf-cn40", "weird"} {
		for _, p := range c.Plans() {
			create, err := c.CreateSchema(p.ID, pr)
			if err != nil {
				assertFieldError(t, err, "platform_region", "not offered")
				continue
			}
			_, err = compileSchema(create)
			require.NoError(t, err, "%s/%s create", pr, p.Name)
			update, err := c.UpdateSchema(p.ID)
			require.NoError(t, err)
			_, err = compileSchema(update)
			require.NoError(t, err, "%s update", p.Name)
		}
	}
}

func TestProviderFor(t *testing.T) {
	c := defaultCatalog(t)
	cases := []struct {
		plan, platformRegion, want string
	}{
		{trialID, "cf-eu10", "aws"},
		{trialID, "cf-eu20", "azure"},
		{trialID, "cf-us30", "gcp"},
		{trialID, "cf-eu01", "aws"},
		{trialID, "", "aws"},
		{trialID, "no-digits", "aws"},
		{freeID, "cf-eu20", "azure"},
		{freeID, "cf-us30", "aws"},
		{azureID, "cf-eu10", "azure"},
		{openstackID, "cf-eu01", "openstack"},
		{ownClusterID, "cf-eu10", ProviderOwn},
	}
	for _, tc := range cases {
		got, err := c.ProviderFor(tc.plan, tc.platformRegion)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s %s", tc.plan, tc.platformRegion)
	}
	_, err := c.ProviderFor("nope", "cf-eu10")
	assertFieldError(t, err, "plan_id", "unknown plan")

	for pr, want := range map[string]string{"cf-eu10": "aws", "cf-eu20": "azure", "cf-us30": "gcp", "cf-eu01": "openstack", "cf-cn40": "alicloud"} {
		got, ok := c.PlatformProvider(pr)
		assert.True(t, ok)
		assert.Equal(t, want, got, pr)
	}
	_, ok := c.PlatformProvider("cf-eu")
	assert.False(t, ok)
}

func TestCanUpgrade(t *testing.T) {
	c := defaultCatalog(t)
	cases := []struct {
		from, to string
		want     bool
	}{
		{azureLiteID, azureID, true},
		{awsID, awsHAID, true},
		{azureID, azureHAID, true},
		{freeID, awsID, true},
		{freeID, azureID, true},
		{awsID, awsID, true},
		{trialID, awsID, false},
		{awsID, azureID, false},
		{awsHAID, awsID, false},
		{azureID, azureLiteID, false},
		{"nope", awsID, false},
		{awsID, "nope", false},
		{"azure_lite", "azure", true},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, c.CanUpgrade(tc.from, tc.to), "%s -> %s", tc.from, tc.to)
	}
	// a disabled target is no upgrade
	c2, err := c.WithEnabledPlans([]string{"aws"})
	require.NoError(t, err)
	assert.False(t, c2.CanUpgrade(awsID, awsHAID))
}

func TestAllowedRegions(t *testing.T) {
	c := defaultCatalog(t)
	got, err := c.AllowedRegions(awsID, "cf-eu11")
	require.NoError(t, err)
	assert.Equal(t, []string{"eu-central-1"}, got)
	got, err = c.AllowedRegions(ownClusterID, "cf-eu11")
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = c.AllowedRegions("x", "")
	assertFieldError(t, err, "plan_id", "unknown")
}

func TestLoadFileAndEmbedded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.yaml")
	require.NoError(t, os.WriteFile(path, resources.Plans(), 0o600))
	c, err := FromConfig(Config{PlansFile: path})
	require.NoError(t, err)
	assert.Len(t, c.Plans(), 11)

	_, err = LoadFile(filepath.Join(t.TempDir(), "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plans file")

	// resources.Plans returns a copy every time
	a := resources.Plans()
	a[0] = 'X'
	assert.NotEqual(t, a[0], resources.Plans()[0])
}

func TestLoadWithoutEnabledPlansEnablesAll(t *testing.T) {
	raw := strings.Replace(string(resources.Plans()), "enabled_plans: [", "# enabled_plans: [", 1)
	c, err := Load([]byte(raw))
	require.NoError(t, err)
	assert.Len(t, c.EnabledPlans(), 11)
}

func TestLoadErrors(t *testing.T) {
	base := string(resources.Plans())
	cases := []struct {
		name, old, new, field, reason string
	}{
		{"not yaml", "service:", "service: [", "", "not valid YAML"},
		{"unknown top-level field", "enabled_plans:", "enable_plans:", "(top level)", `unknown field "enable_plans"`},
		{"unknown plan field", "    upgradable_to: [aws_ha]", "    upgradeable_to: [aws_ha]", `plans["aws"]`, `unknown field "upgradeable_to"`},
		{"wrong type", "    expiry_days: 14", "    expiry_days: soon", `plans["trial"].expiry_days`, "must be a number"},
		{"default machine type not listed", "default_machine_type: m6i.large\n    upgradable_to: [aws_ha]", "default_machine_type: m5.large\n    upgradable_to: [aws_ha]", `plans["aws"].providers.aws.default_machine_type`, `"m5.large" is not one of machine_types`},
		{"empty machine types", "        machine_types: [n2-standard-2, n2-standard-4, n2-standard-8, n2-standard-16,\n          n2-standard-32, n2-standard-48]", "        machine_types: []", `plans["gcp"].providers.gcp.machine_types`, "must not be empty"},
		{"unknown provider", "      openstack:\n        machine_types: [g_c2", "      vsphere:\n        machine_types: [g_c2", `plans["sap-converged-cloud"].providers.vsphere`, "not defined under providers"},
		{"unknown region", "        regions: [eu-central-1, us-east-1, ap-southeast-1]", "        regions: [eu-central-1, mars-1]", `plans["trial"].providers.aws.regions`, `"mars-1" is not one of the regions of provider aws`},
		{"unknown upgrade", "upgradable_to: [azure_ha]", "upgradable_to: [azure_xl]", `plans["azure"].upgradable_to[0]`, `"azure_xl" is not defined`},
		{"self upgrade", "upgradable_to: [aws_ha]", "upgradable_to: [aws]", `plans["aws"].upgradable_to[0]`, "itself"},
		{"duplicate id", "id: 5cb3d976-b85c-42ea-a636-79cadda109a9", "id: 361c511f-f939-4621-b228-d0fb79a1fe15", `plans["preview"].id`, "used by another plan"},
		{"duplicate name", "  - name: preview", "  - name: aws", `plans["aws"].name`, "used by another plan"},
		{"missing id", "    id: ca6e5357-707f-4565-bbbd-b3ab732597c6\n", "", `plans["gcp"].id`, "is required"},
		{"bad autoscaler", "auto_scaler: {min: 2, max: 10, lower_bound: 2, upper_bound: 40}", "auto_scaler: {min: 12, max: 10, lower_bound: 2, upper_bound: 40}", `plans["azure_lite"].auto_scaler.max`, "must not be less than min"},
		{"bad fallback", "    fallback_provider: aws\n    region_optional: true\n    auto_scaler: {min: 1, max: 1, lower_bound: 1, upper_bound: 1}\n    free: true\n    trial: true", "    fallback_provider: gcpx\n    region_optional: true\n    auto_scaler: {min: 1, max: 1, lower_bound: 1, upper_bound: 1}\n    free: true\n    trial: true", `plans["trial"].fallback_provider`, "not one of the plan's providers"},
		{"unknown enabled plan", "enabled_plans: [azure,", "enabled_plans: [azur,", "enabled_plans[0]", `"azur" is not defined`},
		{"bad default networking", "nodes: 10.250.0.0/16", "nodes: 10.250.0.0/99", "defaults.networking.nodes", "not a CIDR"},
		{"overlapping default networking", "pods: 10.96.0.0/13", "pods: 10.248.0.0/13", "defaults.networking.nodes", "overlaps"},
		{"narrowing outside the provider", "cf-ch20: [switzerlandnorth]", "cf-ch20: [zurich]", `providers.azure.platform_regions.cf-ch20`, `"zurich"`},
		{"missing service id", "  id: 47c9dcbf-ff30-448e-ab36-d3bad66ba281\n", "", "service.id", "is required"},
		{"bad signing alg", "signing_algs: [RS256]", "signing_algs: [none]", "defaults.oidc.signing_algs[0]", `"none"`},
		{"own cluster with provider", "    own_cluster: true\n", "    own_cluster: true\n    providers: {aws: {machine_types: [a]}}\n", `plans["own_cluster"].providers`, "must be empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, base, tc.old, "test case does not apply to the plans file")
			_, err := Load([]byte(strings.Replace(base, tc.old, tc.new, 1)))
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "plans file: "), err.Error())
			if tc.field != "" {
				assertFieldError(t, err, tc.field, tc.reason)
			} else {
				assert.Contains(t, err.Error(), tc.reason)
			}
		})
	}
	t.Run("no plans", func(t *testing.T) {
		i := strings.Index(base, "plans:\n  - name: azure")
		_, err := Load([]byte(base[:i] + "plans: []\n"))
		assertFieldError(t, err, "plans", "at least one plan")
	})
}

func assertFieldError(t *testing.T, err error, field, reason string) {
	t.Helper()
	require.Error(t, err)
	fe, ok := AsFieldError(err)
	require.True(t, ok, "not a FieldError: %v", err)
	assert.Equal(t, field, fe.Field, err.Error())
	assert.Contains(t, fe.Reason, reason, err.Error())
	assert.True(t, strings.Contains(err.Error(), field+": "), err.Error())
}

func TestPlanProviderNamesSorted(t *testing.T) {
	c := defaultCatalog(t)
	trial, _ := c.Plan(trialID)
	assert.True(t, slices.IsSorted(trial.ProviderNames()))
	assert.Equal(t, []string{"aws", "azure", "gcp"}, trial.ProviderNames())
}
