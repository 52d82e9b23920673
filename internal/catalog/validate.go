package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ProvisioningParameters are validated provisioning parameters with every
// default applied, plus what the plan, platform region and context decided.
type ProvisioningParameters struct {
	PlanID         string `json:"planID"`
	PlanName       string `json:"planName"`
	PlatformRegion string `json:"platformRegion"`
	// Provider: aws, azure, gcp, openstack (... as in the plans file) or ProviderOwn.
	Provider        string `json:"provider"`
	GlobalAccountID string `json:"globalAccountID"`
	SubAccountID    string `json:"subAccountID"`
	UserID          string `json:"userID,omitempty"`

	Name string `json:"name"`
	// Region is the hyperscaler region (defaulted where the plan makes it optional);
	// empty for own_cluster.
	Region            string      `json:"region,omitempty"`
	MachineType       string      `json:"machineType,omitempty"`
	AutoScalerMin     int         `json:"autoScalerMin,omitempty"`
	AutoScalerMax     int         `json:"autoScalerMax,omitempty"`
	OIDC              *OIDC       `json:"oidc,omitempty"`
	Administrators    []string    `json:"administrators,omitempty"`
	Networking        *Networking `json:"networking,omitempty"`
	Modules           *Modules    `json:"modules,omitempty"`
	KymaVersion       string      `json:"kymaVersion,omitempty"`
	KubernetesVersion string      `json:"kubernetesVersion,omitempty"`
	ZonesCount        int         `json:"zonesCount,omitempty"`

	// own_cluster only.
	Kubeconfig  string `json:"kubeconfig,omitempty"`
	ShootName   string `json:"shootName,omitempty"`
	ShootDomain string `json:"shootDomain,omitempty"`
}

// OIDC configures the runtime's API server to trust an OpenID Connect issuer.
type OIDC struct {
	ClientID       string   `json:"clientID"`
	IssuerURL      string   `json:"issuerURL"`
	GroupsClaim    string   `json:"groupsClaim,omitempty"`
	UsernameClaim  string   `json:"usernameClaim,omitempty"`
	UsernamePrefix string   `json:"usernamePrefix,omitempty"`
	SigningAlgs    []string `json:"signingAlgs,omitempty"`
}

// Networking holds the runtime's IPv4 CIDRs.
type Networking struct {
	Nodes    string `json:"nodes"`
	Pods     string `json:"pods"`
	Services string `json:"services"`
}

// Modules selects the Kyma modules: exactly one of Default and List is set. Default true: the
// default modules; false: none. List (Default nil): exactly these modules, possibly none. The
// instance keeps them as they are validated here.
type Modules = instance.Modules

// Module is one Kyma module; empty Channel and CustomResourcePolicy mean the module's defaults.
type Module = instance.Module

// UpdateParameters are validated update parameters: nil means unchanged.
type UpdateParameters struct {
	MachineType    *string  `json:"machineType,omitempty"`
	AutoScalerMin  *int     `json:"autoScalerMin,omitempty"`
	AutoScalerMax  *int     `json:"autoScalerMax,omitempty"`
	OIDC           *OIDC    `json:"oidc,omitempty"`
	Administrators []string `json:"administrators,omitempty"`
	Modules        *Modules `json:"modules,omitempty"`
}

// IsEmpty reports whether the update changes no parameter.
func (u UpdateParameters) IsEmpty() bool {
	return u.MachineType == nil && u.AutoScalerMin == nil && u.AutoScalerMax == nil &&
		u.OIDC == nil && u.Administrators == nil && u.Modules == nil
}

// ApplyTo merges the update into an instance's parameters and checks the
// result (autoScalerMin <= autoScalerMax across old and new values).
func (u UpdateParameters) ApplyTo(p ProvisioningParameters) (ProvisioningParameters, error) {
	if u.MachineType != nil {
		p.MachineType = *u.MachineType
	}
	if u.AutoScalerMin != nil {
		p.AutoScalerMin = *u.AutoScalerMin
	}
	if u.AutoScalerMax != nil {
		p.AutoScalerMax = *u.AutoScalerMax
	}
	if u.OIDC != nil {
		o := *u.OIDC
		o.SigningAlgs = slices.Clone(o.SigningAlgs)
		p.OIDC = &o
	}
	if u.Administrators != nil {
		p.Administrators = slices.Clone(u.Administrators)
	}
	if u.Modules != nil {
		m := *u.Modules
		m.List = slices.Clone(m.List)
		p.Modules = &m
	}
	if (u.AutoScalerMin != nil || u.AutoScalerMax != nil) && p.AutoScalerMin > p.AutoScalerMax {
		field := "parameters.autoScalerMin"
		if u.AutoScalerMin == nil {
			field = "parameters.autoScalerMax"
		}
		return p, fieldErr(field, fmt.Sprintf("autoScalerMin must not be greater than autoScalerMax (%d > %d)", p.AutoScalerMin, p.AutoScalerMax))
	}
	return p, nil
}

type provisionInput struct {
	Name           string       `json:"name"`
	Region         string       `json:"region"`
	MachineType    string       `json:"machineType"`
	AutoScalerMin  *json.Number `json:"autoScalerMin"`
	AutoScalerMax  *json.Number `json:"autoScalerMax"`
	OIDC           *OIDC        `json:"oidc"`
	Administrators []string     `json:"administrators"`
	Networking     *struct {
		Nodes    *string `json:"nodes"`
		Pods     *string `json:"pods"`
		Services *string `json:"services"`
	} `json:"networking"`
	Modules     *Modules `json:"modules"`
	KymaVersion string   `json:"kymaVersion"`
	Kubeconfig  string   `json:"kubeconfig"`
	ShootName   string   `json:"shootName"`
	ShootDomain string   `json:"shootDomain"`
}

type updateInput struct {
	MachineType    *string      `json:"machineType"`
	AutoScalerMin  *json.Number `json:"autoScalerMin"`
	AutoScalerMax  *json.Number `json:"autoScalerMax"`
	OIDC           *OIDC        `json:"oidc"`
	Administrators []string     `json:"administrators"`
	Modules        *Modules     `json:"modules"`
}

// ValidateProvision validates provisioning parameters for an enabled plan in
// a platform region ("" means DefaultPlatformRegion) against the plan's
// create schema and the rules a schema cannot express, applies the defaults
// and returns the typed parameters. Every error is a *FieldError.
func (c *Catalog) ValidateProvision(planID, platformRegion string, params json.RawMessage, ctx Context) (ProvisioningParameters, error) {
	if platformRegion == "" {
		platformRegion = DefaultPlatformRegion
	}
	i, ok := c.byID[planID]
	if !ok || !c.enabled[planID] {
		return ProvisioningParameters{}, fieldErr("plan_id", "unknown plan "+strconv.Quote(planID))
	}
	p := &c.plans[i]
	prov, err := c.providerFor(p, platformRegion)
	if err != nil {
		return ProvisioningParameters{}, err
	}
	regions := c.allowedRegions(p, prov, platformRegion)
	if !p.OwnCluster && len(regions) == 0 {
		return ProvisioningParameters{}, notOffered(p, platformRegion)
	}
	if err := ctx.Validate(); err != nil {
		return ProvisioningParameters{}, err
	}
	raw, doc, ferr := decodeParameters(params)
	if ferr != nil {
		return ProvisioningParameters{}, ferr
	}
	key := "create\x00" + p.ID + "\x00" + prov + "\x00" + strings.Join(regions, ",")
	sch, err := c.compiled(key, func() map[string]any { return c.createSchema(p, prov, regions) })
	if err != nil {
		return ProvisioningParameters{}, fmt.Errorf("plans: compiling the schema of plan %s: %w", p.Name, err)
	}
	if err := sch.Validate(doc); err != nil {
		return ProvisioningParameters{}, schemaFieldError(err, doc)
	}
	var in provisionInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return ProvisioningParameters{}, jsonFieldError("parameters", err)
	}

	out := ProvisioningParameters{
		PlanID:            p.ID,
		PlanName:          p.Name,
		PlatformRegion:    platformRegion,
		Provider:          prov,
		GlobalAccountID:   ctx.GlobalAccountID(),
		SubAccountID:      ctx.SubAccountID(),
		UserID:            ctx.UserID,
		Name:              in.Name,
		Administrators:    in.Administrators,
		Modules:           in.Modules,
		KymaVersion:       in.KymaVersion,
		KubernetesVersion: p.KubernetesVersion,
	}
	if out.Administrators == nil && ctx.UserID != "" {
		out.Administrators = []string{ctx.UserID}
	}
	if err := checkModules(in.Modules); err != nil {
		return ProvisioningParameters{}, err
	}
	if p.OwnCluster {
		out.Kubeconfig, out.ShootName, out.ShootDomain = in.Kubeconfig, in.ShootName, in.ShootDomain
		return out, nil
	}

	out.ZonesCount = p.ZonesCount
	out.Region = in.Region
	if out.Region == "" {
		if !p.RegionOptional {
			return ProvisioningParameters{}, fieldErr("parameters.region", "is required")
		}
		out.Region = regions[0]
	}
	if !slices.Contains(regions, out.Region) {
		return ProvisioningParameters{}, fieldErr("parameters.region", fmt.Sprintf("%q is not offered in platform region %s (use one of %s)", out.Region, platformRegion, strings.Join(regions, ", ")))
	}
	pp := p.Providers[prov]
	out.MachineType = in.MachineType
	if out.MachineType == "" {
		out.MachineType = pp.DefaultMachineType
	}
	if !slices.Contains(pp.MachineTypes, out.MachineType) {
		return ProvisioningParameters{}, fieldErr("parameters.machineType", fmt.Sprintf("must be one of %s", strings.Join(pp.MachineTypes, ", ")))
	}

	out.AutoScalerMin, out.AutoScalerMax = p.AutoScaler.Min, p.AutoScaler.Max
	if in.AutoScalerMin != nil {
		if out.AutoScalerMin, err = toInt("parameters.autoScalerMin", *in.AutoScalerMin); err != nil {
			return ProvisioningParameters{}, err
		}
	}
	if in.AutoScalerMax != nil {
		if out.AutoScalerMax, err = toInt("parameters.autoScalerMax", *in.AutoScalerMax); err != nil {
			return ProvisioningParameters{}, err
		}
	}
	if err := checkAutoScalerParams(p.AutoScaler, out.AutoScalerMin, out.AutoScalerMax, in.AutoScalerMin == nil); err != nil {
		return ProvisioningParameters{}, err
	}

	if out.OIDC, err = c.oidcWithDefaults(in.OIDC); err != nil {
		return ProvisioningParameters{}, err
	}

	nw := c.defaults.Networking
	var given [3]bool
	if in.Networking != nil {
		for i, f := range []struct {
			v   *string
			dst *string
		}{{in.Networking.Nodes, &nw.Nodes}, {in.Networking.Pods, &nw.Pods}, {in.Networking.Services, &nw.Services}} {
			if f.v != nil {
				*f.dst = *f.v
				given[i] = true
			}
		}
	}
	if nw, err = checkNetworking("parameters.networking", nw, given); err != nil {
		return ProvisioningParameters{}, err
	}
	out.Networking = &nw
	return out, nil
}

// ValidateUpdate validates update parameters for a plan (enabled or not: an
// existing instance may update) against the plan's update schema and returns
// the typed changes; merge them with UpdateParameters.ApplyTo. Every error is
// a *FieldError.
func (c *Catalog) ValidateUpdate(planID string, params json.RawMessage) (UpdateParameters, error) {
	i, ok := c.byID[planID]
	if !ok {
		return UpdateParameters{}, fieldErr("plan_id", "unknown plan "+strconv.Quote(planID))
	}
	p := &c.plans[i]
	raw, doc, ferr := decodeParameters(params)
	if ferr != nil {
		return UpdateParameters{}, ferr
	}
	sch, err := c.compiled("update\x00"+p.ID, func() map[string]any { return c.updateSchema(p) })
	if err != nil {
		return UpdateParameters{}, fmt.Errorf("plans: compiling the update schema of plan %s: %w", p.Name, err)
	}
	if err := sch.Validate(doc); err != nil {
		return UpdateParameters{}, schemaFieldError(err, doc)
	}
	var in updateInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return UpdateParameters{}, jsonFieldError("parameters", err)
	}
	out := UpdateParameters{MachineType: in.MachineType, Administrators: in.Administrators, Modules: in.Modules}
	if err := checkModules(in.Modules); err != nil {
		return UpdateParameters{}, err
	}
	if in.AutoScalerMin != nil {
		v, err := toInt("parameters.autoScalerMin", *in.AutoScalerMin)
		if err != nil {
			return UpdateParameters{}, err
		}
		out.AutoScalerMin = &v
	}
	if in.AutoScalerMax != nil {
		v, err := toInt("parameters.autoScalerMax", *in.AutoScalerMax)
		if err != nil {
			return UpdateParameters{}, err
		}
		out.AutoScalerMax = &v
	}
	if out.AutoScalerMin != nil && out.AutoScalerMax != nil {
		if err := checkAutoScalerParams(p.AutoScaler, *out.AutoScalerMin, *out.AutoScalerMax, false); err != nil {
			return UpdateParameters{}, err
		}
	}
	if out.MachineType != nil && !slices.Contains(updateMachineTypes(p), *out.MachineType) {
		return UpdateParameters{}, fieldErr("parameters.machineType", "must be one of "+strings.Join(updateMachineTypes(p), ", "))
	}
	if out.OIDC, err = c.oidcWithDefaults(in.OIDC); err != nil {
		return UpdateParameters{}, err
	}
	return out, nil
}

// decodeParameters reads the parameters object; absent, empty or null
// parameters are {}.
func decodeParameters(params json.RawMessage) ([]byte, any, *FieldError) {
	raw := bytes.TrimSpace(params)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fieldErr("parameters", "must be a valid JSON object: "+err.Error())
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, nil, fieldErr("parameters", "must be a JSON object")
	}
	return raw, doc, nil
}

func toInt(field string, n json.Number) (int, error) {
	if i, err := strconv.ParseInt(string(n), 10, 32); err == nil {
		return int(i), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, fieldErr(field, "must be an integer")
	}
	return int(f), nil
}

func checkAutoScalerParams(as AutoScaler, min, max int, minDefaulted bool) error {
	if min < as.LowerBound || min > as.UpperBound {
		return fieldErr("parameters.autoScalerMin", fmt.Sprintf("must be between %d and %d (got %d)", as.LowerBound, as.UpperBound, min))
	}
	if max < as.LowerBound || max > as.UpperBound {
		return fieldErr("parameters.autoScalerMax", fmt.Sprintf("must be between %d and %d (got %d)", as.LowerBound, as.UpperBound, max))
	}
	if min > max {
		field := "parameters.autoScalerMin"
		if minDefaulted {
			field = "parameters.autoScalerMax"
			return fieldErr(field, fmt.Sprintf("must not be less than autoScalerMin (%d < %d)", max, min))
		}
		return fieldErr(field, fmt.Sprintf("must not be greater than autoScalerMax (%d > %d)", min, max))
	}
	return nil
}

func (c *Catalog) oidcWithDefaults(in *OIDC) (*OIDC, error) {
	if in == nil {
		return nil, nil
	}
	o := *in
	u, err := url.Parse(o.IssuerURL)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		return nil, fieldErr("parameters.oidc.issuerURL", "must be an https URL with a host")
	case u.RawQuery != "" || u.Fragment != "" || strings.Contains(o.IssuerURL, "#"):
		return nil, fieldErr("parameters.oidc.issuerURL", "must not contain a query or fragment")
	case u.User != nil:
		return nil, fieldErr("parameters.oidc.issuerURL", "must not contain user information")
	}
	d := c.defaults.OIDC
	if o.GroupsClaim == "" {
		o.GroupsClaim = d.GroupsClaim
	}
	if o.UsernameClaim == "" {
		o.UsernameClaim = d.UsernameClaim
	}
	if o.UsernamePrefix == "" {
		o.UsernamePrefix = d.UsernamePrefix
	}
	if len(o.SigningAlgs) == 0 {
		o.SigningAlgs = slices.Clone(d.SigningAlgs)
	}
	return &o, nil
}

func checkModules(m *Modules) error {
	if m == nil {
		return nil
	}
	if m.Default != nil && m.List != nil {
		return fieldErr("parameters.modules", "must set exactly one of default and list")
	}
	seen := map[string]int{}
	for i, mod := range m.List {
		if j, dup := seen[mod.Name]; dup {
			return fieldErr(joinIndex("parameters.modules.list", i)+".name", fmt.Sprintf("module %q is already listed at list[%d]", mod.Name, j))
		}
		seen[mod.Name] = i
	}
	return nil
}

// checkNetworking parses and checks the three CIDRs: valid IPv4 network
// addresses that do not overlap. given says which ones the user set (an
// overlap is reported on a user-set field).
func checkNetworking(at string, nw Networking, given [3]bool) (Networking, error) {
	names := [3]string{"nodes", "pods", "services"}
	values := [3]string{nw.Nodes, nw.Pods, nw.Services}
	var prefixes [3]netip.Prefix
	for i, v := range values {
		field := at + "." + names[i]
		pfx, err := netip.ParsePrefix(strings.TrimSpace(v))
		if err != nil {
			return nw, fieldErr(field, fmt.Sprintf("%q is not a CIDR such as 10.250.0.0/16", v))
		}
		if !pfx.Addr().Is4() {
			return nw, fieldErr(field, fmt.Sprintf("%q is not an IPv4 CIDR", v))
		}
		if pfx.Masked() != pfx {
			return nw, fieldErr(field, fmt.Sprintf("%q is not a network address (did you mean %s?)", v, pfx.Masked()))
		}
		if pfx.Bits() < 8 || pfx.Bits() > 28 {
			return nw, fieldErr(field, fmt.Sprintf("%q must have a prefix length between /8 and /28", v))
		}
		prefixes[i] = pfx
	}
	for _, pair := range [][2]int{{0, 1}, {0, 2}, {1, 2}} {
		a, b := pair[0], pair[1]
		if !prefixes[a].Overlaps(prefixes[b]) {
			continue
		}
		blame, other := a, b
		if !given[a] && given[b] {
			blame, other = b, a
		}
		return nw, fieldErr(at+"."+names[blame], fmt.Sprintf("%s overlaps %s (%s)", prefixes[blame], names[other], prefixes[other]))
	}
	return Networking{Nodes: prefixes[0].String(), Pods: prefixes[1].String(), Services: prefixes[2].String()}, nil
}
