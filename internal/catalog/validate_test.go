package catalog

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func btpContext() Context {
	return Context{Platform: PlatformSAP, GlobalAccount: "ga-1", SubAccount: "sa-1", UserID: "jane@example.com"}
}

func TestValidateProvisionRules(t *testing.T) {
	c := defaultCatalog(t)
	cases := []struct {
		name           string
		plan           string
		platformRegion string
		params         string
		ctx            *Context
		field, reason  string
	}{
		{"malformed JSON", awsID, "", `{"name":`, nil, "parameters", "must be a valid JSON object"},
		{"trailing data", awsID, "", `{"name":"a","region":"eu-central-1"} x`, nil, "parameters", "must be a valid JSON object"},
		{"not an object", awsID, "", `[1,2]`, nil, "parameters", "must be a JSON object"},
		{"string", awsID, "", `"abc"`, nil, "parameters", "must be a JSON object"},
		{"unknown plan", "nope", "", `{}`, nil, "plan_id", "unknown plan"},
		{"disabled plan", previewID, "", `{"name":"a","region":"eu-central-1"}`, nil, "plan_id", "unknown plan"},
		{"missing name", awsID, "", `{"region":"eu-central-1"}`, nil, "parameters.name", "is required"},
		{"missing region", awsID, "", `{"name":"a"}`, nil, "parameters.region", "is required"},
		{"name empty", awsID, "", `{"name":"","region":"eu-central-1"}`, nil, "parameters.name", "must not be empty"},
		{"name too long", awsID, "", `{"name":"` + strings.Repeat("a", 65) + `","region":"eu-central-1"}`, nil, "parameters.name", "at most 64"},
		{"name pattern", awsID, "", `{"name":"my cluster","region":"eu-central-1"}`, nil, "parameters.name", "only letters, digits and '-'"},
		{"name type", awsID, "", `{"name":5,"region":"eu-central-1"}`, nil, "parameters.name", "must be a string (got number)"},
		{"unknown parameter", awsID, "", `{"name":"a","region":"eu-central-1","colour":"red"}`, nil, "parameters.colour", "not a supported parameter"},
		{"region of another provider", awsID, "", `{"name":"a","region":"westeurope"}`, nil, "parameters.region", `must be one of "eu-central-1"`},
		{"region not for this platform region", awsID, "cf-eu11", `{"name":"a","region":"us-east-1"}`, nil, "parameters.region", `must be one of "eu-central-1"`},
		{"trial region of another platform region", trialID, "cf-eu20", `{"name":"a","region":"eu-central-1"}`, nil, "parameters.region", `must be one of "westeurope"`},
		{"machine type", awsID, "", `{"name":"a","region":"eu-central-1","machineType":"Standard_D4s_v5"}`, nil, "parameters.machineType", `must be one of "m6i.large"`},
		{"trial machine type", trialID, "", `{"name":"a","machineType":"m6i.xlarge"}`, nil, "parameters.machineType", "not a supported parameter"},
		{"trial autoscaler", trialID, "", `{"name":"a","autoScalerMax":3}`, nil, "parameters.autoScalerMax", "not a supported parameter"},
		{"autoscaler min > max", awsID, "", `{"name":"a","region":"eu-central-1","autoScalerMin":10,"autoScalerMax":5}`, nil, "parameters.autoScalerMin", "must not be greater than autoScalerMax (10 > 5)"},
		{"autoscaler min > default max", awsID, "", `{"name":"a","region":"eu-central-1","autoScalerMin":25}`, nil, "parameters.autoScalerMin", "must not be greater than autoScalerMax (25 > 20)"},
		{"autoscaler below bound", awsID, "", `{"name":"a","region":"eu-central-1","autoScalerMin":2}`, nil, "parameters.autoScalerMin", "must be at least 3 (got 2)"},
		{"autoscaler above bound", awsID, "", `{"name":"a","region":"eu-central-1","autoScalerMax":301}`, nil, "parameters.autoScalerMax", "must be at most 300 (got 301)"},
		{"autoscaler not integer", awsID, "", `{"name":"a","region":"eu-central-1","autoScalerMax":3.5}`, nil, "parameters.autoScalerMax", "must be an integer"},
		{"autoscaler string", awsID, "", `{"name":"a","region":"eu-central-1","autoScalerMax":"5"}`, nil, "parameters.autoScalerMax", "must be an integer (got string)"},
		{"azure_lite bounds", azureLiteID, "", `{"name":"a","region":"westeurope","autoScalerMax":41}`, nil, "parameters.autoScalerMax", "at most 40"},
		{"oidc missing clientID", awsID, "", `{"name":"a","region":"eu-central-1","oidc":{"issuerURL":"https://issuer.example.com"}}`, nil, "parameters.oidc.clientID", "is required"},
		{"oidc missing issuer", awsID, "", `{"name":"a","region":"eu-central-1","oidc":{"clientID":"c"}}`, nil, "parameters.oidc.issuerURL", "is required"},
		{"oidc http issuer", awsID, "", `{"name":"a","region":"eu-central-1","oidc":{"clientID":"c","issuerURL":"http://issuer.example.com"}}`, nil, "parameters.oidc.issuerURL", "must be an https URL"},
		{"oidc issuer without host", awsID, "", `{"name":"a","region":"eu-central-1","oidc":{"clientID":"c","issuerURL":"https:///path"}}`, nil, "parameters.oidc.issuerURL", "must be an https URL with a host"},
		{"oidc issuer with query", awsID, "", `{"name":"a","region":"eu-central-1","oidc":{"clientID":"c","issuerURL":"https://issuer.example.com/?a=b"}}`, nil, "parameters.oidc.issuerURL", "query or fragment"},
		{"oidc signing alg", awsID, "", `{"name":"a","region":"eu-central-1","oidc":{"clientID":"c","issuerURL":"https://i.example.com","signingAlgs":["RS256","none"]}}`, nil, "parameters.oidc.signingAlgs[1]", `must be one of "RS256"`},
		{"oidc unknown field", awsID, "", `{"name":"a","region":"eu-central-1","oidc":{"clientID":"c","issuerURL":"https://i.example.com","extra":1}}`, nil, "parameters.oidc.extra", "not a supported field"},
		{"administrators type", awsID, "", `{"name":"a","region":"eu-central-1","administrators":"jane"}`, nil, "parameters.administrators", "must be an array"},
		{"administrators empty", awsID, "", `{"name":"a","region":"eu-central-1","administrators":[]}`, nil, "parameters.administrators", "must not be empty"},
		{"administrators empty string", awsID, "", `{"name":"a","region":"eu-central-1","administrators":["a",""]}`, nil, "parameters.administrators[1]", "must not be empty"},
		{"administrators duplicate", awsID, "", `{"name":"a","region":"eu-central-1","administrators":["a","a"]}`, nil, "parameters.administrators[1]", "duplicates item 0"},
		{"networking invalid CIDR", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"nodes":"10.250.0.0"}}`, nil, "parameters.networking.nodes", "not a CIDR"},
		{"networking IPv6", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"pods":"fd00::/64"}}`, nil, "parameters.networking.pods", "not an IPv4 CIDR"},
		{"networking host bits", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"nodes":"10.250.1.0/16"}}`, nil, "parameters.networking.nodes", "did you mean 10.250.0.0/16"},
		{"networking too small", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"nodes":"10.250.0.0/30"}}`, nil, "parameters.networking.nodes", "prefix length"},
		{"nodes overlap pods", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"nodes":"10.96.0.0/16"}}`, nil, "parameters.networking.nodes", "overlaps pods (10.96.0.0/13)"},
		{"nodes overlap services", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"nodes":"10.104.0.0/16"}}`, nil, "parameters.networking.nodes", "overlaps services (10.104.0.0/13)"},
		{"services overlap nodes", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"services":"10.250.0.0/20"}}`, nil, "parameters.networking.services", "overlaps nodes"},
		{"pods overlap services", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"pods":"10.104.0.0/16"}}`, nil, "parameters.networking.pods", "overlaps services"},
		{"networking unknown", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"nodes":"10.250.0.0/16","egress":"x"}}`, nil, "parameters.networking.egress", "not a supported field"},
		{"networking type", awsID, "", `{"name":"a","region":"eu-central-1","networking":{"nodes":16}}`, nil, "parameters.networking.nodes", "must be a string"},
		{"modules both", awsID, "", `{"name":"a","region":"eu-central-1","modules":{"default":true,"list":[]}}`, nil, "parameters.modules", "exactly one of default and list"},
		{"modules neither", awsID, "", `{"name":"a","region":"eu-central-1","modules":{}}`, nil, "parameters.modules", "exactly one of default and list"},
		{"module without name", awsID, "", `{"name":"a","region":"eu-central-1","modules":{"list":[{"channel":"fast"}]}}`, nil, "parameters.modules.list[0].name", "is required"},
		{"module channel", awsID, "", `{"name":"a","region":"eu-central-1","modules":{"list":[{"name":"btp-operator","channel":"beta"}]}}`, nil, "parameters.modules.list[0].channel", `must be one of "regular", "fast"`},
		{"module policy", awsID, "", `{"name":"a","region":"eu-central-1","modules":{"list":[{"name":"btp-operator","customResourcePolicy":"Delete"}]}}`, nil, "parameters.modules.list[0].customResourcePolicy", `"CreateAndDelete"`},
		{"module name pattern", awsID, "", `{"name":"a","region":"eu-central-1","modules":{"list":[{"name":"BTP"}]}}`, nil, "parameters.modules.list[0].name", "lowercase"},
		{"module duplicate", awsID, "", `{"name":"a","region":"eu-central-1","modules":{"list":[{"name":"istio"},{"name":"istio"}]}}`, nil, "parameters.modules.list[1].name", "already listed at list[0]"},
		{"kymaVersion pattern", awsID, "", `{"name":"a","region":"eu-central-1","kymaVersion":"2 x"}`, nil, "parameters.kymaVersion", "may contain only"},
		{"own cluster without kubeconfig", ownClusterID, "", `{"name":"a","shootName":"s","shootDomain":"d"}`, nil, "parameters.kubeconfig", "is required"},
		{"own cluster region", ownClusterID, "", `{"name":"a","kubeconfig":"k","shootName":"s","shootDomain":"d","region":"eu-central-1"}`, nil, "parameters.region", "not a supported parameter"},
		{"no global account", awsID, "", `{"name":"a","region":"eu-central-1"}`, &Context{UserID: "u"}, "context.globalaccount_id", "is required"},
		{"no subaccount", awsID, "", `{"name":"a","region":"eu-central-1"}`, &Context{GlobalAccount: "ga"}, "context.subaccount_id", "is required"},
		{"several errors: first by field", awsID, "", `{"name":"a b","region":"mars","autoScalerMin":1}`, nil, "parameters.autoScalerMin", "must be at least 3"},
	}
	// own_cluster and preview are disabled by default
	c, err := c.WithEnabledPlans(append(names(c.EnabledPlans()), "own_cluster"))
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := btpContext()
			if tc.ctx != nil {
				ctx = *tc.ctx
			}
			_, err := c.ValidateProvision(tc.plan, tc.platformRegion, json.RawMessage(tc.params), ctx)
			assertFieldError(t, err, tc.field, tc.reason)
			assert.NotContains(t, err.Error(), "jsonschema", "no raw validator output")
			assert.NotContains(t, err.Error(), "mem://", "no raw validator output")
		})
	}
}

func names(plans []Plan) []string {
	var out []string
	for _, p := range plans {
		out = append(out, p.Name)
	}
	return out
}

func TestValidateProvisionDefaults(t *testing.T) {
	c := defaultCatalog(t)
	ctx := btpContext()

	t.Run("aws minimal", func(t *testing.T) {
		p, err := c.ValidateProvision(awsID, "", json.RawMessage(`{"name":"my-runtime","region":"eu-west-2"}`), ctx)
		require.NoError(t, err)
		assert.Equal(t, ProvisioningParameters{
			PlanID: awsID, PlanName: "aws", PlatformRegion: "cf-eu10", Provider: "aws",
			GlobalAccountID: "ga-1", SubAccountID: "sa-1", UserID: "jane@example.com",
			Name: "my-runtime", Region: "eu-west-2", MachineType: "m6i.large",
			AutoScalerMin: 3, AutoScalerMax: 20,
			Administrators:    []string{"jane@example.com"},
			Networking:        &Networking{Nodes: "10.250.0.0/16", Pods: "10.96.0.0/13", Services: "10.104.0.0/13"},
			KubernetesVersion: "1.33",
		}, p)
	})
	t.Run("everything given", func(t *testing.T) {
		p, err := c.ValidateProvision(azureID, "cf-eu20", json.RawMessage(`{
			"name":"r","region":"northeurope","machineType":"Standard_D8s_v5","autoScalerMin":4,"autoScalerMax":4.0,
			"oidc":{"clientID":"cid","issuerURL":"https://issuer.example.com/tenant","usernamePrefix":"oidc:"},
			"administrators":["a@example.com","b@example.com"],
			"networking":{"nodes":"10.180.0.0/16"},
			"modules":{"list":[{"name":"btp-operator","channel":"fast","customResourcePolicy":"Ignore"},{"name":"istio"}]},
			"kymaVersion":"2.20.0"}`), ctx)
		require.NoError(t, err)
		assert.Equal(t, "azure", p.Provider)
		assert.Equal(t, "Standard_D8s_v5", p.MachineType)
		assert.Equal(t, 4, p.AutoScalerMin)
		assert.Equal(t, 4, p.AutoScalerMax)
		assert.Equal(t, &OIDC{ClientID: "cid", IssuerURL: "https://issuer.example.com/tenant", GroupsClaim: "groups",
			UsernameClaim: "sub", UsernamePrefix: "oidc:", SigningAlgs: []string{"RS256"}}, p.OIDC)
		assert.Equal(t, []string{"a@example.com", "b@example.com"}, p.Administrators)
		assert.Equal(t, &Networking{Nodes: "10.180.0.0/16", Pods: "10.96.0.0/13", Services: "10.104.0.0/13"}, p.Networking)
		assert.Nil(t, p.Modules.Default)
		assert.Equal(t, []Module{{Name: "btp-operator", Channel: "fast", CustomResourcePolicy: "Ignore"}, {Name: "istio"}}, p.Modules.List)
		assert.Equal(t, "2.20.0", p.KymaVersion)
	})
	t.Run("trial picks provider and region", func(t *testing.T) {
		for pr, want := range map[string][2]string{
			"cf-eu10": {"aws", "eu-central-1"}, "cf-eu20": {"azure", "westeurope"},
			"cf-us30": {"gcp", "europe-west3"}, "cf-eu01": {"aws", "eu-central-1"},
		} {
			p, err := c.ValidateProvision(trialID, pr, json.RawMessage(`{"name":"t"}`), ctx)
			require.NoError(t, err, pr)
			assert.Equal(t, want[0], p.Provider, pr)
			assert.Equal(t, want[1], p.Region, pr)
			assert.Equal(t, 1, p.AutoScalerMin)
			assert.Equal(t, 1, p.AutoScalerMax)
			assert.NotEmpty(t, p.MachineType)
		}
		p, err := c.ValidateProvision(trialID, "cf-eu20", json.RawMessage(`{"name":"t","region":"eastus"}`), ctx)
		require.NoError(t, err)
		assert.Equal(t, "eastus", p.Region)
		assert.Equal(t, "Standard_D4s_v5", p.MachineType)
	})
	t.Run("empty and null parameters", func(t *testing.T) {
		for _, raw := range []string{"", "null", "  "} {
			p, err := c.ValidateProvision(trialID, "", json.RawMessage(raw), ctx)
			assertFieldError(t, err, "parameters.name", "is required")
			assert.Empty(t, p.PlanID)
		}
	})
	t.Run("no user id: no default administrators", func(t *testing.T) {
		p, err := c.ValidateProvision(awsID, "", json.RawMessage(`{"name":"a","region":"eu-central-1"}`), Context{OrganizationGUID: "org", SpaceGUID: "space"})
		require.NoError(t, err)
		assert.Nil(t, p.Administrators)
		assert.Equal(t, "org", p.GlobalAccountID)
		assert.Equal(t, "space", p.SubAccountID)
	})
	t.Run("modules default", func(t *testing.T) {
		p, err := c.ValidateProvision(awsID, "", json.RawMessage(`{"name":"a","region":"eu-central-1","modules":{"default":false}}`), ctx)
		require.NoError(t, err)
		require.NotNil(t, p.Modules.Default)
		assert.False(t, *p.Modules.Default)
		p, err = c.ValidateProvision(awsID, "", json.RawMessage(`{"name":"a","region":"eu-central-1","modules":{"list":[]}}`), ctx)
		require.NoError(t, err)
		assert.Nil(t, p.Modules.Default)
		assert.Empty(t, p.Modules.List)
	})
	t.Run("ha plan zones", func(t *testing.T) {
		p, err := c.ValidateProvision(awsHAID, "", json.RawMessage(`{"name":"a","region":"eu-central-1"}`), ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, p.ZonesCount)
	})
	t.Run("own cluster", func(t *testing.T) {
		c2, err := c.WithEnabledPlans([]string{"own_cluster"})
		require.NoError(t, err)
		p, err := c2.ValidateProvision(ownClusterID, "", json.RawMessage(`{"name":"a","kubeconfig":"apiVersion: v1","shootName":"s","shootDomain":"s.example.com"}`), ctx)
		require.NoError(t, err)
		assert.Equal(t, ProviderOwn, p.Provider)
		assert.Equal(t, "apiVersion: v1", p.Kubeconfig)
		assert.Empty(t, p.Region)
		assert.Nil(t, p.Networking)
	})
	t.Run("parameters round-trip as JSON", func(t *testing.T) {
		p, err := c.ValidateProvision(awsID, "", json.RawMessage(`{"name":"a","region":"eu-central-1","modules":{"list":[]}}`), ctx)
		require.NoError(t, err)
		raw, err := json.Marshal(p)
		require.NoError(t, err)
		var back ProvisioningParameters
		require.NoError(t, json.Unmarshal(raw, &back))
		assert.Equal(t, p.Networking, back.Networking)
		assert.NotNil(t, back.Modules)
	})
}

func TestValidateUpdate(t *testing.T) {
	c := defaultCatalog(t)
	cases := []struct {
		name, plan, params, field, reason string
	}{
		{"unknown plan", "nope", `{}`, "plan_id", "unknown plan"},
		{"malformed", awsID, `{`, "parameters", "must be a valid JSON object"},
		{"name not updatable", awsID, `{"name":"b"}`, "parameters.name", "not a supported parameter"},
		{"region not updatable", awsID, `{"region":"eu-west-2"}`, "parameters.region", "not a supported parameter"},
		{"networking not updatable", awsID, `{"networking":{"nodes":"10.250.0.0/16"}}`, "parameters.networking", "not a supported parameter"},
		{"machine type", awsID, `{"machineType":"n2-standard-2"}`, "parameters.machineType", `must be one of "m6i.large"`},
		{"min > max", awsID, `{"autoScalerMin":10,"autoScalerMax":5}`, "parameters.autoScalerMin", "must not be greater than autoScalerMax (10 > 5)"},
		{"bound", awsID, `{"autoScalerMax":1}`, "parameters.autoScalerMax", "must be at least 3"},
		{"oidc issuer", awsID, `{"oidc":{"clientID":"c","issuerURL":"ftp://x"}}`, "parameters.oidc.issuerURL", "must be an https URL"},
		{"administrators empty", awsID, `{"administrators":[]}`, "parameters.administrators", "must not be empty"},
		{"trial has no machine type", trialID, `{"machineType":"m6i.xlarge"}`, "parameters.machineType", "not a supported parameter"},
		{"modules both", awsID, `{"modules":{"default":true,"list":[]}}`, "parameters.modules", "exactly one of default and list"},
		{"modules duplicate", awsID, `{"modules":{"list":[{"name":"keda"},{"name":"keda"}]}}`, "parameters.modules.list[1].name", "already listed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ValidateUpdate(tc.plan, json.RawMessage(tc.params))
			assertFieldError(t, err, tc.field, tc.reason)
		})
	}

	t.Run("valid update", func(t *testing.T) {
		u, err := c.ValidateUpdate(awsID, json.RawMessage(`{"machineType":"m6i.xlarge","autoScalerMax":30,
			"oidc":{"clientID":"c","issuerURL":"https://i.example.com"},"administrators":["x@example.com"]}`))
		require.NoError(t, err)
		assert.Equal(t, "m6i.xlarge", *u.MachineType)
		assert.Nil(t, u.AutoScalerMin)
		assert.Equal(t, 30, *u.AutoScalerMax)
		assert.Equal(t, "groups", u.OIDC.GroupsClaim)
		assert.Equal(t, []string{"x@example.com"}, u.Administrators)
		assert.False(t, u.IsEmpty())
	})
	t.Run("empty update", func(t *testing.T) {
		for _, raw := range []string{"", "null", "{}"} {
			u, err := c.ValidateUpdate(trialID, json.RawMessage(raw))
			require.NoError(t, err)
			assert.True(t, u.IsEmpty())
		}
	})
	t.Run("disabled plan can still update", func(t *testing.T) {
		_, err := c.ValidateUpdate(previewID, json.RawMessage(`{"autoScalerMax":5}`))
		require.NoError(t, err)
	})
	t.Run("apply", func(t *testing.T) {
		p, err := c.ValidateProvision(awsID, "", json.RawMessage(`{"name":"a","region":"eu-central-1","autoScalerMin":5,"autoScalerMax":10}`), btpContext())
		require.NoError(t, err)
		u, err := c.ValidateUpdate(awsID, json.RawMessage(`{"autoScalerMax":4}`))
		require.NoError(t, err)
		_, err = u.ApplyTo(p)
		assertFieldError(t, err, "parameters.autoScalerMax", "(5 > 4)")

		u, err = c.ValidateUpdate(awsID, json.RawMessage(`{"autoScalerMin":4,"machineType":"m6i.2xlarge","administrators":["z"]}`))
		require.NoError(t, err)
		got, err := u.ApplyTo(p)
		require.NoError(t, err)
		assert.Equal(t, 4, got.AutoScalerMin)
		assert.Equal(t, 10, got.AutoScalerMax)
		assert.Equal(t, "m6i.2xlarge", got.MachineType)
		assert.Equal(t, []string{"z"}, got.Administrators)
		assert.Equal(t, "eu-central-1", got.Region)
		assert.Nil(t, got.Modules)

		u, err = c.ValidateUpdate(awsID, json.RawMessage(`{"modules":{"list":[{"name":"keda","channel":"fast"}]}}`))
		require.NoError(t, err)
		assert.False(t, u.IsEmpty())
		got, err = u.ApplyTo(p)
		require.NoError(t, err)
		assert.Equal(t, &Modules{List: []Module{{Name: "keda", Channel: "fast"}}}, got.Modules, "modules are changeable by update")
	})
}

func TestValidateConcurrently(t *testing.T) {
	c := defaultCatalog(t)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			pr := []string{"cf-eu10", "cf-eu20", "cf-us30"}[i%3]
			_, err := c.ValidateProvision(trialID, pr, json.RawMessage(`{"name":"x"}`), btpContext())
			assert.NoError(t, err)
			_, err = c.ValidateUpdate(awsID, json.RawMessage(`{"autoScalerMax":5}`))
			assert.NoError(t, err)
		}(i)
	}
	wg.Wait()
}

func TestParseContext(t *testing.T) {
	cases := []struct {
		name          string
		raw           string
		ga, sa        string
		check         func(t *testing.T, c Context)
		field, reason string
	}{
		{name: "BTP", raw: `{"platform":"sapcp","globalaccount_id":"ga","subaccount_id":"sa","tenant_id":"t",
			"user_id":"jane@example.com","active":false,"region":"cf-eu10","license_type":"SAPDEV",
			"sm_operator_credentials":{"clientid":"id","clientsecret":"secret","sm_url":"https://sm.example.com","url":"https://auth.example.com","xsappname":"app"}}`,
			ga: "ga", sa: "sa", check: func(t *testing.T, c Context) {
				assert.Equal(t, PlatformSAP, c.Platform)
				assert.Equal(t, "jane@example.com", c.UserID)
				require.NotNil(t, c.Active)
				assert.False(t, *c.Active)
				assert.Equal(t, "cf-eu10", c.Region)
				assert.Equal(t, "SAPDEV", c.LicenseType)
				assert.Equal(t, SMOperatorCredentials{ClientID: "id", ClientSecret: "secret", SMURL: "https://sm.example.com", URL: "https://auth.example.com", XSAppName: "app"}, *c.SMOperatorCredentials)
				assert.NotEmpty(t, c.Raw)
			}},
		{name: "Cloud Foundry", raw: `{"platform":"cloudfoundry","organization_guid":"org-guid","organization_name":"org","space_guid":"space-guid",
			"space_name":"dev","instance_name":"my-kyma","organization_annotations":{"a":"b"}}`,
			ga: "org-guid", sa: "space-guid", check: func(t *testing.T, c Context) {
				assert.Equal(t, PlatformCloudFoundry, c.Platform)
				assert.Equal(t, "my-kyma", c.InstanceName)
				assert.Equal(t, "dev", c.SpaceName)
				assert.Equal(t, map[string]string{"a": "b"}, c.OrganizationAnnotations)
				assert.Nil(t, c.Active)
			}},
		{name: "Kubernetes", raw: `{"platform":"kubernetes","namespace":"team-a","clusterid":"cluster-1","instance_name":"k"}`,
			ga: "cluster-1", sa: "team-a"},
		{name: "Kubernetes through Service Manager", raw: `{"platform":"kubernetes","namespace":"ns","clusterid":"c","globalaccount_id":"ga","subaccount_id":"sa"}`,
			ga: "ga", sa: "sa"},
		{name: "unknown fields are ignored", raw: `{"globalaccount_id":"ga","subaccount_id":"sa","future":{"x":1}}`, ga: "ga", sa: "sa"},
		{name: "absent", raw: ``, field: "context.globalaccount_id", reason: "is required"},
		{name: "null", raw: `null`, field: "context.globalaccount_id", reason: "is required"},
		{name: "empty", raw: `{}`, field: "context.globalaccount_id", reason: "organization_guid"},
		{name: "only global account", raw: `{"globalaccount_id":"ga"}`, field: "context.subaccount_id", reason: "space_guid"},
		{name: "not an object", raw: `[]`, field: "context", reason: "must be a JSON object"},
		{name: "malformed", raw: `{"platform":`, field: "context", reason: "valid JSON"},
		{name: "active not bool", raw: `{"globalaccount_id":"ga","subaccount_id":"sa","active":"yes"}`, field: "context.active", reason: "must be a boolean"},
		{name: "credentials wrong type", raw: `{"globalaccount_id":"ga","subaccount_id":"sa","sm_operator_credentials":{"clientid":5}}`, field: "context.sm_operator_credentials.clientid", reason: "must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseContext(json.RawMessage(tc.raw))
			if tc.field != "" {
				assertFieldError(t, err, tc.field, tc.reason)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.ga, c.GlobalAccountID())
			assert.Equal(t, tc.sa, c.SubAccountID())
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
	t.Run("decode does not require accounts", func(t *testing.T) {
		c, err := DecodeContext(json.RawMessage(`{"active":true}`))
		require.NoError(t, err)
		assert.True(t, *c.Active)
		assert.Error(t, c.Validate())
	})
}

func FuzzValidateProvision(f *testing.F) {
	seeds := []string{
		`{"name":"a","region":"eu-central-1"}`,
		`{"name":"a","region":"eu-central-1","autoScalerMin":10,"autoScalerMax":5}`,
		`{"name":"a","region":"eu-central-1","networking":{"nodes":"10.96.0.0/16","pods":"10.0.0.0/8"}}`,
		`{"name":"a","region":"eu-central-1","oidc":{"clientID":"c","issuerURL":"https://x"}}`,
		`{"name":"a","modules":{"list":[{"name":"istio"},{"name":"istio"}]}}`,
		`{"autoScalerMin":1e400}`, `{"autoScalerMax":-0.0}`, `[]`, `null`, `"x"`, `{`, ``, `{"name":"\u0000"}`,
		`{"name":"a","region":"eu-central-1","administrators":["a","a"]}`,
	}
	for i, s := range seeds {
		f.Add(s, uint8(i))
	}
	c := defaultCatalog(f)
	c, err := c.WithEnabledPlans(names(c.Plans()))
	require.NoError(f, err)
	plans := c.Plans()
	platformRegions := []string{"", "cf-eu10", "cf-eu11", "cf-eu20", "cf-us30", "cf-eu01", "cf-cn40", "x"}
	f.Fuzz(func(t *testing.T, params string, pick uint8) {
		p := plans[int(pick)%len(plans)]
		pr := platformRegions[int(pick/16)%len(platformRegions)]
		out, err := c.ValidateProvision(p.ID, pr, json.RawMessage(params), btpContext())
		if err != nil {
			fe, ok := AsFieldError(err)
			if !ok || fe.Field == "" || fe.Reason == "" {
				t.Fatalf("not a FieldError: %#v", err)
			}
		} else if !p.OwnCluster {
			if out.AutoScalerMin > out.AutoScalerMax || out.Region == "" || out.MachineType == "" || out.Networking == nil {
				t.Fatalf("accepted inconsistent parameters: %+v", out)
			}
		}
		_, err = c.ValidateUpdate(p.ID, json.RawMessage(params))
		if err != nil {
			if _, ok := AsFieldError(err); !ok {
				t.Fatalf("update: not a FieldError: %#v", err)
			}
		}
		_, _ = ParseContext(json.RawMessage(params))
	})
}
