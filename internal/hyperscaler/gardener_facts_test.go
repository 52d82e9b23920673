package hyperscaler

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// facts is testdata/gardener_account_pool.yaml: what the real pool does, with its sources.
type facts struct {
	Sources map[string]struct {
		Repo   string `json:"repo"`
		Path   string `json:"path"`
		Commit string `json:"commit"`
	} `json:"sources"`
	Labels    map[string]string `json:"labels"`
	Resources map[string]struct {
		Group      string `json:"group"`
		Version    string `json:"version"`
		Resource   string `json:"resource"`
		ShootField string `json:"shoot_field"`
	} `json:"resources"`
	Selectors        map[string][]string `json:"selectors"`
	HyperscalerTypes []struct {
		Provider       string `json:"provider"`
		Region         string `json:"region"`
		PlatformRegion string `json:"platform_region"`
		Key            string `json:"key"`
	} `json:"hyperscaler_types"`
	EUAccessRegions []string `json:"eu_access_platform_regions"`
	SharedPlans     []string `json:"shared_plans"`
}

func loadFacts(t *testing.T) facts {
	t.Helper()
	raw, err := os.ReadFile("testdata/gardener_account_pool.yaml")
	require.NoError(t, err)
	var f facts
	require.NoError(t, yaml.Unmarshal(raw, &f))
	return f
}

func TestFactsCiteTheirSources(t *testing.T) {
	f := loadFacts(t)
	require.NotEmpty(t, f.Sources)
	for name, s := range f.Sources {
		assert.NotEmpty(t, s.Repo, name)
		assert.NotEmpty(t, s.Path, name)
		assert.Len(t, s.Commit, 40, name)
	}
}

func TestLabelKeysAndResourcesAreGardeners(t *testing.T) {
	f := loadFacts(t)
	assert.Equal(t, map[string]string{
		"hyperscaler_type": LabelHyperscalerType, "tenant_name": LabelTenantName, "dirty": LabelDirty,
		"internal": LabelInternal, "shared": LabelShared, "eu_access": LabelEUAccess,
	}, f.Labels)
	for _, k := range []BindingKind{SecretBinding, CredentialsBinding} {
		r, ok := f.Resources[string(k)]
		require.True(t, ok, k)
		gvr := k.Resource()
		assert.Equal(t, [3]string{r.Group, r.Version, r.Resource}, [3]string{gvr.Group, gvr.Version, gvr.Resource}, k)
		assert.Equal(t, r.ShootField, k.ShootField(), k)
	}
}

// requirements parses a selector into its sorted requirement strings.
func requirements(t *testing.T, sel string) []string {
	t.Helper()
	s, err := labels.Parse(sel)
	require.NoError(t, err, sel)
	reqs, _ := s.Requirements()
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.String()
	}
	sort.Strings(out)
	return out
}

func TestSelectorsAreKEBs(t *testing.T) {
	f := loadFacts(t)
	fill := func(reqs []string, key, tenant string, eu bool) string {
		euReq := "!" + LabelEUAccess
		if eu {
			euReq = LabelEUAccess + "=true"
		}
		s := strings.Join(reqs, ",")
		return strings.NewReplacer("<key>", key, "<tenant>", tenant, "<euAccess>", euReq).Replace(s)
	}
	for _, eu := range []bool{false, true} {
		own := Request{Provider: "azure", Tenant: "ga-1", EUAccess: eu}
		assert.Equal(t, requirements(t, fill(f.Selectors["exclusive_own"], "azure", "ga-1", eu)),
			requirements(t, Selector(own, LabelTenantName+"=ga-1")))
		assert.Equal(t, requirements(t, fill(f.Selectors["exclusive_claim"], "azure", "ga-1", eu)),
			requirements(t, Selector(own, "!"+LabelTenantName)))
		shared := Request{Provider: "azure", Shared: true, EUAccess: eu}
		assert.Equal(t, requirements(t, fill(f.Selectors["shared"], "azure", "", eu)), requirements(t, Selector(shared)))
	}
}

func TestHyperscalerTypeKeysAndDefaultRules(t *testing.T) {
	f := loadFacts(t)
	for _, c := range f.HyperscalerTypes {
		r := Request{Provider: c.Provider, Region: c.Region, PlatformRegion: c.PlatformRegion}
		assert.Equal(t, c.Key, r.Key(), "%+v", c)
	}
	d := DefaultRules()
	assert.Equal(t, f.EUAccessRegions, d.EUAccessRegions)
	assert.Equal(t, f.SharedPlans, d.SharedPlans)
	r := d.Request("aws", "trial", "cf-eu11", "eu-central-1", "ga")
	assert.True(t, r.Shared && r.EUAccess)
	r = d.Request("aws", "aws", "cf-us10", "us-east-1", "ga")
	assert.False(t, r.Shared || r.EUAccess)
}
