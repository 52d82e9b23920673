package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// SchemaDraft is the JSON schema dialect of the generated schemas.
const SchemaDraft = "http://json-schema.org/draft-07/schema#"

const (
	namePattern        = `^[a-zA-Z0-9-]*$`
	httpsPattern       = `^https://`
	kymaVersionPattern = `^[a-zA-Z0-9._+-]+$`
	moduleNamePattern  = `^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
)

// patternReasons are the user-facing reasons of pattern violations.
var patternReasons = map[string]string{
	namePattern:        "may contain only letters, digits and '-'",
	httpsPattern:       "must be an https URL",
	kymaVersionPattern: "may contain only letters, digits, '.', '_', '+' and '-'",
	moduleNamePattern:  "must be a lowercase name of letters, digits and '-'",
}

var (
	signingAlgs            = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"}
	moduleChannels         = []string{"regular", "fast"}
	customResourcePolicies = []string{"CreateAndDelete", "Ignore"}
)

// Services returns the OSB catalog for a platform region ("" means
// DefaultPlatformRegion): the kymaruntime service with the enabled plans
// offered there, each with its create and update schema (region enum limited
// to the regions of that platform region). With no plan offered, no service.
func (c *Catalog) Services(platformRegion string) []domain.Service {
	if platformRegion == "" {
		platformRegion = DefaultPlatformRegion
	}
	var plans []domain.ServicePlan
	for i := range c.plans {
		p := &c.plans[i]
		if !c.enabled[p.ID] {
			continue
		}
		prov, err := c.providerFor(p, platformRegion)
		if err != nil {
			continue
		}
		regions := c.allowedRegions(p, prov, platformRegion)
		if !p.OwnCluster && len(regions) == 0 {
			continue
		}
		meta := &domain.ServicePlanMetadata{DisplayName: p.DisplayName}
		if meta.DisplayName == "" {
			meta.DisplayName = p.Name
		}
		plans = append(plans, domain.ServicePlan{
			ID:            p.ID,
			Name:          p.Name,
			Description:   p.Description,
			Free:          domain.FreeValue(p.Free),
			Metadata:      meta,
			PlanUpdatable: domain.PlanUpdatableValue(len(p.UpgradableTo) > 0),
			Schemas: &domain.ServiceSchemas{
				Instance: domain.ServiceInstanceSchema{
					Create: domain.Schema{Parameters: c.createSchema(p, prov, regions)},
					Update: domain.Schema{Parameters: c.updateSchema(p)},
				},
				Binding: domain.ServiceBindingSchema{Create: domain.Schema{Parameters: bindingSchema()}},
			},
		})
	}
	if len(plans) == 0 {
		return []domain.Service{}
	}
	s := c.service
	return []domain.Service{{
		ID:                   s.ID,
		Name:                 s.Name,
		Description:          s.Description,
		Bindable:             s.Bindable,
		InstancesRetrievable: s.InstancesRetrievable,
		BindingsRetrievable:  s.BindingsRetrievable,
		PlanUpdatable:        s.PlanUpdateable,
		AllowContextUpdates:  s.AllowContextUpdates,
		Tags:                 slices.Clone(s.Tags),
		Metadata: &domain.ServiceMetadata{
			DisplayName:         s.Metadata.DisplayName,
			LongDescription:     s.Metadata.LongDescription,
			ProviderDisplayName: s.Metadata.ProviderDisplayName,
			DocumentationUrl:    s.Metadata.DocumentationURL,
			SupportUrl:          s.Metadata.SupportURL,
			ImageUrl:            s.Metadata.ImageURL,
		},
		Plans: plans,
	}}
}

// CreateSchema returns the provisioning parameters schema of a plan in a
// platform region ("" means DefaultPlatformRegion).
func (c *Catalog) CreateSchema(planID, platformRegion string) (map[string]any, error) {
	i, ok := c.byID[planID]
	if !ok {
		return nil, fieldErr("plan_id", "unknown plan "+strconv.Quote(planID))
	}
	p := &c.plans[i]
	prov, err := c.providerFor(p, platformRegion)
	if err != nil {
		return nil, err
	}
	regions := c.allowedRegions(p, prov, platformRegion)
	if !p.OwnCluster && len(regions) == 0 {
		return nil, notOffered(p, platformRegion)
	}
	return c.createSchema(p, prov, regions), nil
}

// UpdateSchema returns the update parameters schema of a plan.
func (c *Catalog) UpdateSchema(planID string) (map[string]any, error) {
	i, ok := c.byID[planID]
	if !ok {
		return nil, fieldErr("plan_id", "unknown plan "+strconv.Quote(planID))
	}
	return c.updateSchema(&c.plans[i]), nil
}

func (c *Catalog) createSchema(p *Plan, prov string, regions []string) map[string]any {
	props := map[string]any{}
	var order, required []string
	add := func(name string, s map[string]any) {
		props[name] = s
		order = append(order, name)
	}
	add("name", map[string]any{
		"type": "string", "title": "Cluster Name", "description": "The name of the runtime.",
		"minLength": 1, "maxLength": 64, "pattern": namePattern,
	})
	required = append(required, "name")
	if p.OwnCluster {
		add("kubeconfig", map[string]any{"type": "string", "title": "Kubeconfig", "minLength": 1,
			"description": "The kubeconfig of the cluster to install Kyma on."})
		add("shootName", map[string]any{"type": "string", "title": "Cluster name", "minLength": 1})
		add("shootDomain", map[string]any{"type": "string", "title": "Cluster domain", "minLength": 1})
		required = append(required, "kubeconfig", "shootName", "shootDomain")
	} else {
		region := map[string]any{"type": "string", "title": "Region", "enum": regions,
			"description": "The hyperscaler region of the runtime."}
		if p.RegionOptional && len(regions) > 0 {
			region["default"] = regions[0]
		} else {
			required = append(required, "region")
		}
		add("region", region)
		pp := p.Providers[prov]
		if len(pp.MachineTypes) > 1 {
			add("machineType", map[string]any{"type": "string", "title": "Machine Type",
				"enum": pp.MachineTypes, "default": pp.DefaultMachineType})
		}
		addAutoScaler(p.AutoScaler, add)
	}
	if !p.OwnCluster {
		add("oidc", oidcSchema())
	}
	add("administrators", administratorsSchema())
	if !p.OwnCluster {
		nw := c.defaults.Networking
		cidr := func(title, def string) map[string]any {
			return map[string]any{"type": "string", "title": title, "default": def,
				"description": "An IPv4 CIDR, for example " + def + "."}
		}
		add("networking", map[string]any{
			"type": "object", "title": "Networking",
			"properties": map[string]any{
				"nodes":    cidr("Node network CIDR", nw.Nodes),
				"pods":     cidr("Pod network CIDR", nw.Pods),
				"services": cidr("Service network CIDR", nw.Services),
			},
			"additionalProperties": false,
		})
	}
	add("modules", modulesSchema())
	add("kymaVersion", map[string]any{"type": "string", "title": "Kyma version",
		"minLength": 1, "maxLength": 64, "pattern": kymaVersionPattern})
	return map[string]any{
		"$schema":              SchemaDraft,
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
		"_controlsOrder":       order,
	}
}

func notOffered(p *Plan, platformRegion string) *FieldError {
	if platformRegion == "" {
		platformRegion = DefaultPlatformRegion
	}
	return fieldErr("platform_region", fmt.Sprintf("plan %s is not offered in platform region %q", p.Name, platformRegion))
}

func addAutoScaler(as AutoScaler, add func(string, map[string]any)) {
	if as.LowerBound >= as.UpperBound {
		return
	}
	add("autoScalerMin", map[string]any{"type": "integer", "title": "Minimum number of worker nodes",
		"minimum": as.LowerBound, "maximum": as.UpperBound, "default": as.Min})
	add("autoScalerMax", map[string]any{"type": "integer", "title": "Maximum number of worker nodes",
		"minimum": as.LowerBound, "maximum": as.UpperBound, "default": as.Max})
}

func (c *Catalog) updateSchema(p *Plan) map[string]any {
	props := map[string]any{}
	var order []string
	add := func(name string, s map[string]any) {
		props[name] = s
		order = append(order, name)
	}
	if !p.OwnCluster {
		if mts := updateMachineTypes(p); len(mts) > 1 {
			add("machineType", map[string]any{"type": "string", "title": "Machine Type", "enum": mts})
		}
		addAutoScaler(p.AutoScaler, add)
		add("oidc", oidcSchema())
	}
	add("administrators", administratorsSchema())
	add("modules", modulesSchema())
	return map[string]any{
		"$schema":              SchemaDraft,
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
		"_controlsOrder":       order,
	}
}

// updateMachineTypes: the machine types of all the plan's providers (an
// update does not know the platform region), provider by provider; none
// when no provider offers a choice.
func updateMachineTypes(p *Plan) []string {
	choice := false
	for _, pp := range p.Providers {
		choice = choice || len(pp.MachineTypes) > 1
	}
	if !choice {
		return nil
	}
	var out []string
	for _, name := range p.ProviderNames() {
		for _, mt := range p.Providers[name].MachineTypes {
			if !slices.Contains(out, mt) {
				out = append(out, mt)
			}
		}
	}
	return out
}

func oidcSchema() map[string]any {
	str := func(title string) map[string]any {
		return map[string]any{"type": "string", "title": title}
	}
	return map[string]any{
		"type": "object", "title": "OIDC",
		"description": "The OpenID Connect issuer that the runtime's API server trusts.",
		"properties": map[string]any{
			"clientID":       map[string]any{"type": "string", "title": "Client ID", "minLength": 1},
			"issuerURL":      map[string]any{"type": "string", "title": "Issuer URL", "minLength": 9, "pattern": httpsPattern},
			"groupsClaim":    str("Groups claim"),
			"usernameClaim":  str("Username claim"),
			"usernamePrefix": str("Username prefix"),
			"signingAlgs": map[string]any{"type": "array", "title": "Signing algorithms", "minItems": 1,
				"uniqueItems": true, "items": map[string]any{"type": "string", "enum": signingAlgs}},
		},
		"required":             []string{"clientID", "issuerURL"},
		"additionalProperties": false,
	}
}

func administratorsSchema() map[string]any {
	return map[string]any{
		"type": "array", "title": "Administrators",
		"description": "Users with cluster-admin rights; the requesting user by default.",
		"minItems":    1, "uniqueItems": true,
		"items": map[string]any{"type": "string", "minLength": 1},
	}
}

func modulesSchema() map[string]any {
	return map[string]any{
		"type": "object", "title": "Modules",
		"description": "Either default: true|false (the default modules or none) or a list of modules.",
		"properties": map[string]any{
			"default": map[string]any{"type": "boolean", "title": "Use the default modules"},
			"list": map[string]any{
				"type": "array", "title": "Modules",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"name":                 map[string]any{"type": "string", "minLength": 1, "maxLength": 63, "pattern": moduleNamePattern},
						"channel":              map[string]any{"type": "string", "enum": moduleChannels},
						"customResourcePolicy": map[string]any{"type": "string", "enum": customResourcePolicies},
					},
					"required":             []string{"name"},
					"additionalProperties": false,
				},
			},
		},
		"minProperties":        1,
		"maxProperties":        1,
		"additionalProperties": false,
	}
}

// compiled returns the compiled form of a generated schema, cached by key.
func (c *Catalog) compiled(key string, gen func() map[string]any) (*jsonschema.Schema, error) {
	if s, ok := c.schemas.Load(key); ok {
		return s.(*jsonschema.Schema), nil
	}
	s, err := compileSchema(gen())
	if err != nil {
		return nil, err
	}
	c.schemas.Store(key, s)
	return s, nil
}

// compileSchema compiles a generated schema with the validator.
func compileSchema(schema map[string]any) (*jsonschema.Schema, error) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	const url = "mem://kyma-environment-broker/parameters.json"
	if err := comp.AddResource(url, doc); err != nil {
		return nil, err
	}
	return comp.Compile(url)
}

// schemaFieldError turns a validator error into one FieldError: the first,
// by field path, of the most specific failures.
func schemaFieldError(err error, instance any) *FieldError {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fieldErr("parameters", "are invalid")
	}
	var leaves []*jsonschema.ValidationError
	var collect func(*jsonschema.ValidationError)
	collect = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.OneOf, *kind.AnyOf, *kind.Not:
			leaves = append(leaves, e)
			return
		}
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			collect(c)
		}
	}
	collect(ve)
	var out []*FieldError
	for _, l := range leaves {
		out = append(out, leafFieldError(l, instance))
	}
	if len(out) == 0 {
		return fieldErr("parameters", "are invalid")
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return out[i].Reason < out[j].Reason
	})
	return out[0]
}

func instancePath(loc []string, instance any) string {
	path := "parameters"
	cur := instance
	for _, tok := range loc {
		switch v := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return joinProp(path, tok)
			}
			path = joinIndex(path, i)
			cur = v[i]
		case map[string]any:
			path = joinProp(path, tok)
			cur = v[tok]
		default:
			path = joinProp(path, tok)
			cur = nil
		}
	}
	return path
}

func leafFieldError(e *jsonschema.ValidationError, instance any) *FieldError {
	path := instancePath(e.InstanceLocation, instance)
	last := ""
	if n := len(e.InstanceLocation); n > 0 {
		last = e.InstanceLocation[n-1]
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		missing := slices.Sorted(slices.Values(k.Missing))
		return fieldErr(joinProp(path, missing[0]), "is required")
	case *kind.AdditionalProperties:
		props := slices.Sorted(slices.Values(k.Properties))
		if path == "parameters" {
			return fieldErr(joinProp(path, props[0]), "is not a supported parameter")
		}
		return fieldErr(joinProp(path, props[0]), "is not a supported field")
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = jsonTypeName(w)
		}
		return fieldErr(path, "must be "+strings.Join(want, " or ")+" (got "+k.Got+")")
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprintf("%v", w)
			if s, ok := w.(string); ok {
				want[i] = strconv.Quote(s)
			}
		}
		return fieldErr(path, "must be one of "+strings.Join(want, ", "))
	case *kind.MinLength:
		if k.Want <= 1 {
			return fieldErr(path, "must not be empty")
		}
		return fieldErr(path, fmt.Sprintf("must be at least %d characters long", k.Want))
	case *kind.MaxLength:
		return fieldErr(path, fmt.Sprintf("must be at most %d characters long", k.Want))
	case *kind.Pattern:
		if r, ok := patternReasons[k.Want]; ok {
			return fieldErr(path, r)
		}
		return fieldErr(path, "must match "+k.Want)
	case *kind.Minimum:
		return fieldErr(path, "must be at least "+ratString(k.Want)+" (got "+ratString(k.Got)+")")
	case *kind.Maximum:
		return fieldErr(path, "must be at most "+ratString(k.Want)+" (got "+ratString(k.Got)+")")
	case *kind.MinItems:
		if k.Want <= 1 {
			return fieldErr(path, "must not be empty")
		}
		return fieldErr(path, fmt.Sprintf("must have at least %d items", k.Want))
	case *kind.MaxItems:
		return fieldErr(path, fmt.Sprintf("must have at most %d items", k.Want))
	case *kind.UniqueItems:
		return fieldErr(joinIndex(path, k.Duplicates[1]), fmt.Sprintf("duplicates item %d", k.Duplicates[0]))
	case *kind.MinProperties, *kind.MaxProperties:
		if last == "modules" {
			return fieldErr(path, "must set exactly one of default and list")
		}
		return fieldErr(path, "has a wrong number of fields")
	case *kind.FalseSchema:
		return fieldErr(path, "is not allowed")
	}
	return fieldErr(path, "is invalid")
}

func jsonTypeName(t string) string {
	switch t {
	case "object", "array", "integer":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(3)
}

// Bounds and default of the binding parameter expiration_seconds: how long a binding's token
// lives (the API server issues none shorter than 10 minutes).
const (
	BindingExpirationMin     = 600
	BindingExpirationMax     = 7200
	BindingExpirationDefault = 600
)

// bindingSchema is the schema of binding parameters: expiration_seconds, the lifetime of the
// binding's own token. OSB wants a JSON schema or no field, never null.
func bindingSchema() map[string]any {
	return map[string]any{
		"$schema": SchemaDraft, "type": "object",
		"properties": map[string]any{
			"expiration_seconds": map[string]any{
				"type": "integer", "minimum": BindingExpirationMin, "maximum": BindingExpirationMax, "default": BindingExpirationDefault,
				"description": "Lifetime of the binding's token, in seconds.",
			},
		},
		"additionalProperties": false,
	}
}
