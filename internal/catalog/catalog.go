// Package plans holds the broker's OSB catalog: the kymaruntime service, its
// plans, the hyperscaler regions each BTP platform region may use, machine
// types and defaults. Everything comes from a YAML plans file (the embedded
// resources/plans.yaml unless configured otherwise); from it the package
// generates the JSON schemas of the catalog and validates provisioning and
// update parameters and the OSB context.
//
// A Catalog is immutable once loaded and safe for concurrent use.
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/kyma-project/kyma-environment-broker/resources"
)

// DefaultPlatformRegion is the platform region of requests that come without
// one (/v2/... and /oauth/v2/...).
const DefaultPlatformRegion = "cf-eu10"

// ProviderOwn is the provider of own_cluster plans: the user brings the cluster.
const ProviderOwn = "own"

// Config selects the plans file and the enabled plans. With the APP prefix:
// APP_BROKER_PLANS_FILE and APP_BROKER_ENABLED_PLANS (comma-separated plan names).
type Config struct {
	// PlansFile is the path of a plans file; empty means the embedded default.
	PlansFile string `envconfig:"BROKER_PLANS_FILE"`
	// EnabledPlans overrides the file's enabled_plans when not empty.
	EnabledPlans []string `envconfig:"BROKER_ENABLED_PLANS"`
}

// Service describes the one OSB service offering of the broker.
type Service struct {
	ID                   string          `json:"id"`
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Bindable             bool            `json:"bindable"`
	InstancesRetrievable bool            `json:"instances_retrievable"`
	BindingsRetrievable  bool            `json:"bindings_retrievable"`
	PlanUpdateable       bool            `json:"plan_updateable"`
	AllowContextUpdates  bool            `json:"allow_context_updates"`
	Tags                 []string        `json:"tags,omitempty"`
	Metadata             ServiceMetadata `json:"metadata"`
}

// ServiceMetadata is the display metadata of the service offering.
type ServiceMetadata struct {
	DisplayName         string `json:"display_name"`
	LongDescription     string `json:"long_description,omitempty"`
	ProviderDisplayName string `json:"provider_display_name,omitempty"`
	DocumentationURL    string `json:"documentation_url,omitempty"`
	SupportURL          string `json:"support_url,omitempty"`
	ImageURL            string `json:"image_url,omitempty"`
}

// ProviderRegions lists a provider's hyperscaler regions and narrows them per
// platform region (data residency). A platform region that is not listed in
// PlatformRegions may use every region.
type ProviderRegions struct {
	Regions         []string            `json:"regions"`
	PlatformRegions map[string][]string `json:"platform_regions,omitempty"`
}

// AutoScaler holds the default worker counts (Min, Max) and the bounds a user
// may choose within (LowerBound <= Min <= Max <= UpperBound).
type AutoScaler struct {
	Min        int `json:"min"`
	Max        int `json:"max"`
	LowerBound int `json:"lower_bound"`
	UpperBound int `json:"upper_bound"`
}

// OIDCDefaults fill the optional OIDC fields a user leaves out.
type OIDCDefaults struct {
	GroupsClaim    string   `json:"groups_claim"`
	UsernameClaim  string   `json:"username_claim"`
	UsernamePrefix string   `json:"username_prefix"`
	SigningAlgs    []string `json:"signing_algs"`
}

// Defaults apply to every plan that does not set its own value.
type Defaults struct {
	KubernetesVersion string       `json:"kubernetes_version"`
	AutoScaler        AutoScaler   `json:"auto_scaler"`
	Networking        Networking   `json:"networking"`
	OIDC              OIDCDefaults `json:"oidc"`
}

// PlanProvider is what a plan offers on one provider.
type PlanProvider struct {
	// Regions offered on this provider; empty in the file means all regions
	// of the provider. After loading it is never empty. The first region is
	// the default where the plan makes the region optional.
	Regions []string `json:"regions,omitempty"`
	// MachineTypes the user may choose from; with one only, the schema does
	// not offer machineType at all.
	MachineTypes []string `json:"machine_types"`
	// DefaultMachineType; empty in the file means the first machine type.
	DefaultMachineType string `json:"default_machine_type,omitempty"`
}

// Plan is one plan of the catalog, with the catalog defaults applied.
type Plan struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Description string   `json:"description"`
	DisplayName string   `json:"display_name,omitempty"`
	// Providers the plan runs on. With more than one, the platform region
	// picks it (the first digit rule), else FallbackProvider.
	Providers        map[string]PlanProvider `json:"providers,omitempty"`
	FallbackProvider string                  `json:"fallback_provider,omitempty"`
	// RegionOptional: the region parameter may be left out (trial, free).
	RegionOptional    bool       `json:"region_optional,omitempty"`
	AutoScaler        AutoScaler `json:"auto_scaler"`
	UpgradableTo      []string   `json:"upgradable_to,omitempty"`
	Free              bool       `json:"free,omitempty"`
	Trial             bool       `json:"trial,omitempty"`
	ExpiryDays        int        `json:"expiry_days,omitempty"`
	KubernetesVersion string     `json:"kubernetes_version,omitempty"`
	// OwnCluster: Kyma on a cluster the user brings (kubeconfig); no
	// provider, region, machine types or networking.
	OwnCluster bool `json:"own_cluster,omitempty"`
	ZonesCount int  `json:"zones_count,omitempty"`
}

// ProviderNames returns the plan's providers, sorted.
func (p Plan) ProviderNames() []string {
	names := make([]string, 0, len(p.Providers))
	for name := range p.Providers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (p Plan) clone() Plan {
	c := p
	c.Aliases = slices.Clone(p.Aliases)
	c.UpgradableTo = slices.Clone(p.UpgradableTo)
	if p.Providers != nil {
		c.Providers = make(map[string]PlanProvider, len(p.Providers))
		for k, v := range p.Providers {
			v.Regions = slices.Clone(v.Regions)
			v.MachineTypes = slices.Clone(v.MachineTypes)
			c.Providers[k] = v
		}
	}
	return c
}

// Catalog is the loaded plans file. Create it with Load, LoadFile or FromConfig.
type Catalog struct {
	service           Service
	digitProviders    map[string]string
	platformProviders map[string]string
	providers         map[string]ProviderRegions
	defaults          Defaults
	plans             []Plan
	byID              map[string]int
	byName            map[string]int // names and aliases
	enabled           map[string]bool

	schemas sync.Map // string -> *jsonschema.Schema
}

type planFile struct {
	Service                       Service                    `json:"service"`
	ProviderByPlatformRegionDigit map[string]string          `json:"provider_by_platform_region_digit"`
	PlatformRegionProviders       map[string]string          `json:"platform_region_providers"`
	Providers                     map[string]ProviderRegions `json:"providers"`
	Defaults                      Defaults                   `json:"defaults"`
	EnabledPlans                  *[]string                  `json:"enabled_plans"`
	Plans                         []json.RawMessage          `json:"plans"`
}

var planNamePattern = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// FromConfig loads cfg.PlansFile (the embedded default when empty) and applies
// cfg.EnabledPlans when it names any plan.
func FromConfig(cfg Config) (*Catalog, error) {
	var (
		c   *Catalog
		err error
	)
	if cfg.PlansFile == "" {
		c, err = Load(resources.Plans())
	} else {
		c, err = LoadFile(cfg.PlansFile)
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range cfg.EnabledPlans {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return c, nil
	}
	return c.WithEnabledPlans(names)
}

// LoadFile reads and loads a plans file.
func LoadFile(path string) (*Catalog, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plans file: %w", err)
	}
	c, err := Load(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Load parses and checks a plans file. Errors start with "plans file:" and
// wrap a *FieldError naming the plan and field, e.g.
// `plans file: plans["aws"].default_machine_type: "x" is not one of machine_types`.
func Load(raw []byte) (*Catalog, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("plans file: not valid YAML: %w", err)
	}
	var f planFile
	if err := strictUnmarshal(js, &f); err != nil {
		return nil, fmt.Errorf("plans file: %w", jsonFieldError("", err))
	}
	c := &Catalog{
		service:           f.Service,
		digitProviders:    f.ProviderByPlatformRegionDigit,
		platformProviders: f.PlatformRegionProviders,
		providers:         f.Providers,
		defaults:          f.Defaults,
		byID:              map[string]int{},
		byName:            map[string]int{},
		enabled:           map[string]bool{},
	}
	if err := c.checkTop(); err != nil {
		return nil, fmt.Errorf("plans file: %w", err)
	}
	for i, rp := range f.Plans {
		var peek struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(rp, &peek)
		at := "plans[" + strconv.Itoa(i) + "]"
		if peek.Name != "" {
			at = "plans[" + strconv.Quote(peek.Name) + "]"
		}
		var p Plan
		if err := strictUnmarshal(rp, &p); err != nil {
			return nil, fmt.Errorf("plans file: %w", jsonFieldError(at, err))
		}
		if err := c.addPlan(at, p); err != nil {
			return nil, fmt.Errorf("plans file: %w", err)
		}
	}
	if len(c.plans) == 0 {
		return nil, fmt.Errorf("plans file: %w", fieldErr("plans", "must list at least one plan"))
	}
	for i := range c.plans {
		if err := c.resolveUpgrades(i); err != nil {
			return nil, fmt.Errorf("plans file: %w", err)
		}
	}
	if f.EnabledPlans == nil {
		for _, p := range c.plans {
			c.enabled[p.ID] = true
		}
	} else {
		enabled, err := c.resolveNames("enabled_plans", *f.EnabledPlans)
		if err != nil {
			return nil, fmt.Errorf("plans file: %w", err)
		}
		c.enabled = enabled
	}
	return c, nil
}

func strictUnmarshal(js []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// jsonFieldError turns an encoding/json error into a FieldError under base.
func jsonFieldError(base string, err error) *FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := base
		for _, part := range strings.Split(te.Field, ".") {
			field = joinProp(field, part)
		}
		if field == "" {
			field = "(top level)"
		}
		t := te.Type
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		want := "another type"
		if t != nil {
			want = article(t.Kind().String())
		}
		return fieldErr(field, "must be "+want+" (got "+te.Value+")")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if base == "" {
		base = "(top level)"
	}
	return fieldErr(base, msg)
}

func article(kind string) string {
	switch kind {
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "an object"
	case "int", "int64", "int32", "uint", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	}
	return kind
}

func (c *Catalog) checkTop() error {
	s := c.service
	switch {
	case s.ID == "":
		return fieldErr("service.id", "is required")
	case s.Name == "":
		return fieldErr("service.name", "is required")
	case !planNamePattern.MatchString(s.Name):
		return fieldErr("service.name", "may contain only letters, digits, '.', '_' and '-'")
	case s.Description == "":
		return fieldErr("service.description", "is required")
	}
	for d, prov := range c.digitProviders {
		if len(d) != 1 || d[0] < '0' || d[0] > '9' {
			return fieldErr(joinProp("provider_by_platform_region_digit", d), "keys must be single digits")
		}
		if prov == "" {
			return fieldErr(joinProp("provider_by_platform_region_digit", d), "must name a provider")
		}
	}
	if len(c.providers) == 0 {
		return fieldErr("providers", "must list at least one provider")
	}
	for _, name := range sortedKeys(c.providers) {
		pr := c.providers[name]
		at := joinProp("providers", name)
		if len(pr.Regions) == 0 {
			return fieldErr(at+".regions", "must not be empty")
		}
		if d := firstDuplicate(pr.Regions); d != "" {
			return fieldErr(at+".regions", "lists "+strconv.Quote(d)+" twice")
		}
		for _, plat := range sortedKeys(pr.PlatformRegions) {
			regs := pr.PlatformRegions[plat]
			pat := joinProp(at+".platform_regions", plat)
			if len(regs) == 0 {
				return fieldErr(pat, "must not be empty")
			}
			for _, r := range regs {
				if !slices.Contains(pr.Regions, r) {
					return fieldErr(pat, strconv.Quote(r)+" is not one of the provider's regions")
				}
			}
		}
	}
	d := &c.defaults
	if d.KubernetesVersion == "" {
		return fieldErr("defaults.kubernetes_version", "is required")
	}
	if err := checkAutoScaler("defaults.auto_scaler", d.AutoScaler); err != nil {
		return err
	}
	nw := d.Networking
	if _, err := checkNetworking("defaults.networking", nw, [3]bool{true, true, true}); err != nil {
		return err
	}
	for i, alg := range d.OIDC.SigningAlgs {
		if !slices.Contains(signingAlgs, alg) {
			return fieldErr(joinIndex("defaults.oidc.signing_algs", i), strconv.Quote(alg)+" is not one of "+strings.Join(signingAlgs, ", "))
		}
	}
	return nil
}

func checkAutoScaler(at string, a AutoScaler) error {
	switch {
	case a.LowerBound < 1:
		return fieldErr(at+".lower_bound", "must be at least 1")
	case a.Min < a.LowerBound:
		return fieldErr(at+".min", fmt.Sprintf("must not be less than lower_bound (%d < %d)", a.Min, a.LowerBound))
	case a.Max < a.Min:
		return fieldErr(at+".max", fmt.Sprintf("must not be less than min (%d < %d)", a.Max, a.Min))
	case a.UpperBound < a.Max:
		return fieldErr(at+".upper_bound", fmt.Sprintf("must not be less than max (%d < %d)", a.UpperBound, a.Max))
	}
	return nil
}

func (c *Catalog) addPlan(at string, p Plan) error {
	switch {
	case p.Name == "":
		return fieldErr(at+".name", "is required")
	case !planNamePattern.MatchString(p.Name):
		return fieldErr(at+".name", "may contain only letters, digits, '.', '_' and '-'")
	case p.ID == "":
		return fieldErr(at+".id", "is required")
	case p.Description == "":
		return fieldErr(at+".description", "is required")
	case p.ExpiryDays < 0:
		return fieldErr(at+".expiry_days", "must not be negative")
	case p.ZonesCount < 0:
		return fieldErr(at+".zones_count", "must not be negative")
	}
	if _, dup := c.byID[p.ID]; dup {
		return fieldErr(at+".id", strconv.Quote(p.ID)+" is used by another plan")
	}
	for i, n := range append([]string{p.Name}, p.Aliases...) {
		field := at + ".name"
		if i > 0 {
			field = joinIndex(at+".aliases", i-1)
			if !planNamePattern.MatchString(n) {
				return fieldErr(field, "may contain only letters, digits, '.', '_' and '-'")
			}
		}
		if _, dup := c.byName[n]; dup {
			return fieldErr(field, strconv.Quote(n)+" is used by another plan")
		}
	}
	if p.OwnCluster {
		if len(p.Providers) > 0 {
			return fieldErr(at+".providers", "must be empty for an own_cluster plan")
		}
	} else {
		if len(p.Providers) == 0 {
			return fieldErr(at+".providers", "must list at least one provider")
		}
		for _, name := range p.ProviderNames() {
			pp := p.Providers[name]
			pat := joinProp(at+".providers", name)
			known, ok := c.providers[name]
			if !ok {
				return fieldErr(pat, "provider "+strconv.Quote(name)+" is not defined under providers")
			}
			if len(pp.Regions) == 0 {
				pp.Regions = slices.Clone(known.Regions)
			}
			if d := firstDuplicate(pp.Regions); d != "" {
				return fieldErr(pat+".regions", "lists "+strconv.Quote(d)+" twice")
			}
			for _, r := range pp.Regions {
				if !slices.Contains(known.Regions, r) {
					return fieldErr(pat+".regions", strconv.Quote(r)+" is not one of the regions of provider "+name)
				}
			}
			if len(pp.MachineTypes) == 0 {
				return fieldErr(pat+".machine_types", "must not be empty")
			}
			if d := firstDuplicate(pp.MachineTypes); d != "" {
				return fieldErr(pat+".machine_types", "lists "+strconv.Quote(d)+" twice")
			}
			if pp.DefaultMachineType == "" {
				pp.DefaultMachineType = pp.MachineTypes[0]
			} else if !slices.Contains(pp.MachineTypes, pp.DefaultMachineType) {
				return fieldErr(pat+".default_machine_type", strconv.Quote(pp.DefaultMachineType)+" is not one of machine_types")
			}
			p.Providers[name] = pp
		}
		if p.FallbackProvider != "" {
			if _, ok := p.Providers[p.FallbackProvider]; !ok {
				return fieldErr(at+".fallback_provider", strconv.Quote(p.FallbackProvider)+" is not one of the plan's providers")
			}
		}
	}
	if p.AutoScaler == (AutoScaler{}) {
		p.AutoScaler = c.defaults.AutoScaler
	} else if err := checkAutoScaler(at+".auto_scaler", p.AutoScaler); err != nil {
		return err
	}
	if p.KubernetesVersion == "" {
		p.KubernetesVersion = c.defaults.KubernetesVersion
	}
	idx := len(c.plans)
	c.plans = append(c.plans, p)
	c.byID[p.ID] = idx
	c.byName[p.Name] = idx
	for _, a := range p.Aliases {
		c.byName[a] = idx
	}
	return nil
}

func (c *Catalog) resolveUpgrades(i int) error {
	p := &c.plans[i]
	at := "plans[" + strconv.Quote(p.Name) + "].upgradable_to"
	names := make([]string, 0, len(p.UpgradableTo))
	for j, n := range p.UpgradableTo {
		target, ok := c.find(n)
		if !ok {
			return fieldErr(joinIndex(at, j), "plan "+strconv.Quote(n)+" is not defined")
		}
		if target.ID == p.ID {
			return fieldErr(joinIndex(at, j), "a plan cannot be upgraded to itself")
		}
		if !slices.Contains(names, target.Name) {
			names = append(names, target.Name)
		}
	}
	p.UpgradableTo = names
	return nil
}

// resolveNames maps plan names, aliases or IDs to the set of their IDs.
func (c *Catalog) resolveNames(field string, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	for i, n := range names {
		p, ok := c.find(strings.TrimSpace(n))
		if !ok {
			return nil, fieldErr(joinIndex(field, i), "plan "+strconv.Quote(n)+" is not defined")
		}
		out[p.ID] = true
	}
	return out, nil
}

// WithEnabledPlans returns a copy of the catalog with exactly the named plans
// enabled (names, aliases or IDs).
func (c *Catalog) WithEnabledPlans(names []string) (*Catalog, error) {
	enabled, err := c.resolveNames("enabled_plans", names)
	if err != nil {
		return nil, err
	}
	return &Catalog{
		service:           c.service,
		digitProviders:    c.digitProviders,
		platformProviders: c.platformProviders,
		providers:         c.providers,
		defaults:          c.defaults,
		plans:             c.plans,
		byID:              c.byID,
		byName:            c.byName,
		enabled:           enabled,
	}, nil
}

// find looks a plan up by ID, then by name or alias.
func (c *Catalog) find(idOrName string) (*Plan, bool) {
	if i, ok := c.byID[idOrName]; ok {
		return &c.plans[i], true
	}
	if i, ok := c.byName[idOrName]; ok {
		return &c.plans[i], true
	}
	return nil, false
}

// ServiceInfo returns the service offering as configured.
func (c *Catalog) ServiceInfo() Service {
	s := c.service
	s.Tags = slices.Clone(s.Tags)
	return s
}

// ServiceID returns the ID of the kymaruntime service.
func (c *Catalog) ServiceID() string { return c.service.ID }

// Defaults returns the catalog defaults.
func (c *Catalog) Defaults() Defaults {
	d := c.defaults
	d.OIDC.SigningAlgs = slices.Clone(d.OIDC.SigningAlgs)
	return d
}

// Plan returns the plan with that ID, enabled or not (instances of a plan
// that was disabled later still need it).
func (c *Catalog) Plan(id string) (Plan, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Plan{}, false
	}
	return c.plans[i].clone(), true
}

// PlanByName returns the plan with that name or alias, enabled or not.
func (c *Catalog) PlanByName(name string) (Plan, bool) {
	i, ok := c.byName[name]
	if !ok {
		return Plan{}, false
	}
	return c.plans[i].clone(), true
}

// Plans returns every plan of the file, in file order.
func (c *Catalog) Plans() []Plan {
	out := make([]Plan, len(c.plans))
	for i, p := range c.plans {
		out[i] = p.clone()
	}
	return out
}

// EnabledPlans returns the enabled plans, in file order.
func (c *Catalog) EnabledPlans() []Plan {
	var out []Plan
	for _, p := range c.plans {
		if c.enabled[p.ID] {
			out = append(out, p.clone())
		}
	}
	return out
}

// Enabled reports whether the plan with that ID is enabled.
func (c *Catalog) Enabled(planID string) bool { return c.enabled[planID] }

// CanUpgrade reports whether an instance of plan `from` may move to plan `to`
// (both IDs; names work too): the same plan always, otherwise only when `to`
// is enabled and listed in from's upgradable_to.
func (c *Catalog) CanUpgrade(from, to string) bool {
	f, ok := c.find(from)
	if !ok {
		return false
	}
	t, ok := c.find(to)
	if !ok {
		return false
	}
	if f.ID == t.ID {
		return true
	}
	return c.enabled[t.ID] && slices.Contains(f.UpgradableTo, t.Name)
}

// PlatformProvider returns the provider a platform region belongs to: an
// explicit platform_region_providers entry, else the first digit of the
// number in the region's last segment (cf-eu10 -> 1 -> aws, cf-eu20 -> azure,
// cf-us30 -> gcp, cf-eu01 -> openstack).
func (c *Catalog) PlatformProvider(platformRegion string) (string, bool) {
	if p, ok := c.platformProviders[platformRegion]; ok {
		return p, true
	}
	last := platformRegion[strings.LastIndex(platformRegion, "-")+1:]
	for _, r := range last {
		if r >= '0' && r <= '9' {
			p, ok := c.digitProviders[string(r)]
			return p, ok
		}
	}
	return "", false
}

// ProviderFor returns the provider a plan runs on for a platform region
// ("" means DefaultPlatformRegion): the plan's only provider, the platform
// region's provider when the plan offers it, else the plan's fallback;
// ProviderOwn for own_cluster plans. Unknown plans give a FieldError on
// "plan_id", undecidable ones on "platform_region".
func (c *Catalog) ProviderFor(planID, platformRegion string) (string, error) {
	p, ok := c.byID[planID]
	if !ok {
		return "", fieldErr("plan_id", "unknown plan "+strconv.Quote(planID))
	}
	return c.providerFor(&c.plans[p], platformRegion)
}

func (c *Catalog) providerFor(p *Plan, platformRegion string) (string, error) {
	if platformRegion == "" {
		platformRegion = DefaultPlatformRegion
	}
	if p.OwnCluster {
		return ProviderOwn, nil
	}
	if len(p.Providers) == 1 {
		for name := range p.Providers {
			return name, nil
		}
	}
	if prov, ok := c.PlatformProvider(platformRegion); ok {
		if _, offered := p.Providers[prov]; offered {
			return prov, nil
		}
	}
	if p.FallbackProvider != "" {
		return p.FallbackProvider, nil
	}
	return "", notOffered(p, platformRegion)
}

// AllowedRegions returns the hyperscaler regions a plan offers in a platform
// region ("" means DefaultPlatformRegion); the first is the default where the
// region is optional. Own-cluster plans have none.
func (c *Catalog) AllowedRegions(planID, platformRegion string) ([]string, error) {
	i, ok := c.byID[planID]
	if !ok {
		return nil, fieldErr("plan_id", "unknown plan "+strconv.Quote(planID))
	}
	p := &c.plans[i]
	prov, err := c.providerFor(p, platformRegion)
	if err != nil {
		return nil, err
	}
	return c.allowedRegions(p, prov, platformRegion), nil
}

func (c *Catalog) allowedRegions(p *Plan, prov, platformRegion string) []string {
	if p.OwnCluster {
		return nil
	}
	if platformRegion == "" {
		platformRegion = DefaultPlatformRegion
	}
	base := p.Providers[prov].Regions
	narrow, ok := c.providers[prov].PlatformRegions[platformRegion]
	if !ok {
		return slices.Clone(base)
	}
	var out []string
	for _, r := range base {
		if slices.Contains(narrow, r) {
			out = append(out, r)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func firstDuplicate(list []string) string {
	seen := make(map[string]bool, len(list))
	for _, s := range list {
		if seen[s] {
			return s
		}
		seen[s] = true
	}
	return ""
}
