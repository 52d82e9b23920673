// Package shootcontract holds the facts about Gardener's Shoot API that the gardener backend
// relies on (testdata/gardener.json, each fact citing its source) and checks Shoots against
// them. The backend's contract tests check the Shoots it writes; gardenersim rejects what the
// checks reject, as Gardener's API server and its provider extensions would.
package shootcontract

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

//go:embed testdata/gardener.json
var factsJSON []byte

// Rule is one fact about a valid Shoot (see testdata/gardener.json for the kinds).
type Rule struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"`
	Provider string   `json:"provider"`
	Path     string   `json:"path"`
	Paths    []string `json:"paths"`
	Values   []string `json:"values"`
	Optional bool     `json:"optional"`
	Version  string   `json:"version"`
	Kinds    []string `json:"kinds"`
	Field    string   `json:"field"`
	Type     string   `json:"type"`
	Message  string   `json:"message"`
	Source   string   `json:"source"`

	ExtensionType       string            `json:"extensionType"`
	ProviderConfig      map[string]string `json:"providerConfig"`
	Required            []string          `json:"required"`
	SecretReferenceName string            `json:"secretReferenceName"`
	ResourceRef         map[string]string `json:"resourceRef"`

	// ListPath and ListField: a rule on a field of every entry of a list (cidr).
	ListPath  string `json:"listPath"`
	ListField string `json:"listField"`
}

// Source is where a fact comes from.
type Source struct {
	Repository string `json:"repository"`
	Path       string `json:"path"`
	Commit     string `json:"commit"`
}

// AdminKubeconfig are the facts about the shoots/adminkubeconfig subresource.
type AdminKubeconfig struct {
	Method      string `json:"method"`
	Path        string `json:"path"`
	Subresource string `json:"subresource"`
	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind"`
	Spec        struct {
		ExpirationSeconds struct {
			Default    int64  `json:"default"`
			Min        int64  `json:"min"`
			Max        int64  `json:"max"`
			MinMessage string `json:"minMessage"`
		} `json:"expirationSeconds"`
	} `json:"spec"`
	ServerMaxExpiration struct {
		Default string `json:"default"`
	} `json:"serverMaxExpiration"`
	RequiresAdvertisedAddress struct {
		Names   []string `json:"names"`
		Field   string   `json:"field"`
		Message string   `json:"message"`
	} `json:"requiresAdvertisedAddress"`
}

// Facts is the fixture.
type Facts struct {
	Sources map[string]Source `json:"sources"`
	Shoot   struct {
		ProviderConfigAPIVersion map[string]string `json:"providerConfigAPIVersion"`
		DefaultCloudProfiles     map[string]any    `json:"defaultCloudProfiles"`
		Rules                    []Rule            `json:"rules"`
	} `json:"shoot"`
	AdminKubeconfigRequest AdminKubeconfig `json:"adminKubeconfigRequest"`
}

// Load decodes the fixture.
func Load() (Facts, error) {
	var f Facts
	if err := json.Unmarshal(factsJSON, &f); err != nil {
		return f, fmt.Errorf("decoding the Gardener facts: %w", err)
	}
	for _, r := range f.Shoot.Rules {
		if _, ok := f.Sources[r.Source]; !ok {
			return f, fmt.Errorf("rule %s cites unknown source %q", r.ID, r.Source)
		}
	}
	return f, nil
}

// MustLoad is Load for tests and the simulator, whose fixture is compiled in.
func MustLoad() Facts {
	f, err := Load()
	if err != nil {
		panic(err)
	}
	return f
}

// Violation is a rule a Shoot breaks, as Gardener would report it (field, type, message).
type Violation struct {
	Rule    string
	Field   string
	Type    string
	Message string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s: %s (%s)", v.Field, v.Type, v.Message, v.Rule)
}

// Check returns the rules shoot (a Shoot as JSON-decoded maps) breaks.
func (f Facts) Check(shoot map[string]any) []Violation {
	provider, _ := lookup(shoot, "spec.provider.type").(string)
	version, _ := lookup(shoot, "spec.kubernetes.version").(string)
	var out []Violation
	for _, r := range f.Shoot.Rules {
		if r.Provider != "" && r.Provider != provider {
			continue
		}
		out = append(out, f.check(r, shoot, provider, version)...)
	}
	return out
}

func (f Facts) check(r Rule, shoot map[string]any, provider, version string) []Violation {
	fail := func(field, typ, msg string) []Violation {
		return []Violation{{Rule: r.ID, Field: field, Type: typ, Message: msg}}
	}
	count := func() int {
		n := 0
		for _, p := range r.Paths {
			if set(lookup(shoot, p)) {
				n++
			}
		}
		return n
	}
	switch r.Kind {
	case "required":
		if !set(lookup(shoot, r.Path)) {
			return fail(r.Field, r.Type, r.Message)
		}
	case "anyOf":
		if count() == 0 {
			return fail(r.Field, r.Type, r.Message)
		}
	case "oneOf":
		if count() != 1 {
			return fail(r.Field, r.Type, r.Message)
		}
	case "atMostOne":
		if count() > 1 {
			return fail(r.Field, r.Type, r.Message)
		}
	case "enum":
		v := lookup(shoot, r.Path)
		if !set(v) && r.Optional {
			return nil
		}
		s, _ := v.(string)
		for _, ok := range r.Values {
			if s == ok {
				return nil
			}
		}
		return fail(r.Field, r.Type, fmt.Sprintf("%q: %s", s, r.Message))
	case "forbiddenFromVersion":
		if set(lookup(shoot, r.Path)) && AtLeast(version, r.Version) {
			return fail(r.Field, r.Type, r.Message)
		}
	case "resources":
		return checkResources(r, lookup(shoot, r.Path))
	case "extensionTypes":
		return checkExtensionTypes(r, lookup(shoot, r.Path))
	case "providerConfigKinds":
		want := f.Shoot.ProviderConfigAPIVersion[provider]
		if want == "" {
			return nil
		}
		var out []Violation
		for i, p := range r.Paths {
			cfg, ok := lookup(shoot, p).(map[string]any)
			if !ok {
				continue
			}
			if cfg["apiVersion"] != want || cfg["kind"] != r.Kinds[i] {
				out = append(out, Violation{Rule: r.ID, Field: p, Type: r.Type,
					Message: fmt.Sprintf("%s: want %s %s, got %v %v", r.Message, want, r.Kinds[i], cfg["apiVersion"], cfg["kind"])})
			}
		}
		return out
	case "auditlogExtension":
		return checkAuditlog(r, shoot)
	case "cidr":
		return checkCIDRs(r, shoot)
	case "dnsProviders":
		return checkDNSProviders(r, lookup(shoot, r.Path))
	default:
		return fail(r.Field, "Internal", "unknown rule kind "+r.Kind)
	}
	return nil
}

func checkResources(r Rule, v any) []Violation {
	list, _ := v.([]any)
	var out []Violation
	names := map[string]bool{}
	for i, e := range list {
		m, _ := e.(map[string]any)
		at := fmt.Sprintf("%s[%d]", r.Field, i)
		name, _ := m["name"].(string)
		switch {
		case name == "":
			out = append(out, Violation{Rule: r.ID, Field: at + ".name", Type: "Required", Message: "field must not be empty"})
		case names[name]:
			out = append(out, Violation{Rule: r.ID, Field: at + ".name", Type: "Duplicate", Message: name})
		}
		names[name] = true
		ref, _ := m["resourceRef"].(map[string]any)
		for _, k := range []string{"kind", "name", "apiVersion"} {
			if s, _ := ref[k].(string); s == "" {
				out = append(out, Violation{Rule: r.ID, Field: at + ".resourceRef." + k, Type: "Required", Message: "must provide a " + k})
			}
		}
	}
	return out
}

func checkExtensionTypes(r Rule, v any) []Violation {
	list, _ := v.([]any)
	var out []Violation
	types := map[string]bool{}
	for i, e := range list {
		m, _ := e.(map[string]any)
		at := fmt.Sprintf("%s[%d].type", r.Field, i)
		t, _ := m["type"].(string)
		switch {
		case t == "":
			out = append(out, Violation{Rule: r.ID, Field: at, Type: "Required", Message: "field must not be empty"})
		case types[t]:
			out = append(out, Violation{Rule: r.ID, Field: at, Type: "Duplicate", Message: t})
		}
		types[t] = true
	}
	return out
}

// checkCIDRs: every network the rule names (paths, or listField of each entry of listPath)
// parses as a CIDR when set.
func checkCIDRs(r Rule, shoot map[string]any) []Violation {
	values := map[string]any{}
	var fields []string
	for _, p := range r.Paths {
		values[p] = lookup(shoot, p)
		fields = append(fields, p)
	}
	if r.ListPath != "" {
		list, _ := lookup(shoot, r.ListPath).([]any)
		for i, e := range list {
			m, _ := e.(map[string]any)
			f := fmt.Sprintf("%s[%d].%s", r.ListPath, i, r.ListField)
			values[f] = m[r.ListField]
			if values[f] == nil {
				values[f] = ""
			}
			fields = append(fields, f)
		}
	}
	var out []Violation
	for _, f := range fields {
		v := values[f]
		if v == nil {
			continue
		}
		s, _ := v.(string)
		if _, _, err := net.ParseCIDR(s); err != nil {
			out = append(out, Violation{Rule: r.ID, Field: f, Type: r.Type, Message: fmt.Sprintf("%q: %s", s, r.Message)})
		}
	}
	return out
}

// checkDNSProviders: a provider with credentials (secretName) says what it is (type), and at
// most one provider is primary.
func checkDNSProviders(r Rule, v any) []Violation {
	list, _ := v.([]any)
	var out []Violation
	primary := false
	for i, e := range list {
		m, _ := e.(map[string]any)
		at := fmt.Sprintf("%s[%d]", r.Field, i)
		if p, _ := m["primary"].(bool); p {
			if primary {
				out = append(out, Violation{Rule: r.ID, Field: at + ".primary", Type: "Forbidden", Message: "multiple primary DNS providers are not supported"})
				continue
			}
			primary = true
		}
		if set(m["secretName"]) && !set(m["type"]) {
			out = append(out, Violation{Rule: r.ID, Field: at + ".type", Type: "Required", Message: "type must be set when secretName is set"})
		}
	}
	return out
}

// checkAuditlog: the audit log extension, when present, carries the service's tenant, URL and
// the name of the spec.resources entry with its credentials, and that entry references a Secret.
func checkAuditlog(r Rule, shoot map[string]any) []Violation {
	list, _ := lookup(shoot, "spec.extensions").([]any)
	for i, e := range list {
		ext, _ := e.(map[string]any)
		if ext["type"] != r.ExtensionType {
			continue
		}
		at := fmt.Sprintf("spec.extensions[%d].providerConfig", i)
		pc, _ := ext["providerConfig"].(map[string]any)
		var out []Violation
		keys := make([]string, 0, len(r.ProviderConfig))
		for k := range r.ProviderConfig {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if pc[k] != r.ProviderConfig[k] {
				out = append(out, Violation{Rule: r.ID, Field: at + "." + k, Type: "Invalid", Message: fmt.Sprintf("must be %q", r.ProviderConfig[k])})
			}
		}
		for _, k := range r.Required {
			if !set(pc[k]) {
				out = append(out, Violation{Rule: r.ID, Field: at + "." + k, Type: "Required", Message: "the audit log extension needs " + k})
			}
		}
		ref, _ := pc["secretReferenceName"].(string)
		if ref == "" {
			return out
		}
		resources, _ := lookup(shoot, "spec.resources").([]any)
		found := false
		for _, res := range resources {
			m, _ := res.(map[string]any)
			if m["name"] != ref {
				continue
			}
			found = true
			rr, _ := m["resourceRef"].(map[string]any)
			if rr["kind"] != r.ResourceRef["kind"] || rr["apiVersion"] != r.ResourceRef["apiVersion"] || !set(rr["name"]) {
				out = append(out, Violation{Rule: r.ID, Field: "spec.resources", Type: "Invalid",
					Message: fmt.Sprintf("resource %q must reference a %s/%s by name", ref, r.ResourceRef["apiVersion"], r.ResourceRef["kind"])})
			}
		}
		if !found {
			out = append(out, Violation{Rule: r.ID, Field: "spec.resources", Type: "Required",
				Message: fmt.Sprintf("the audit log extension's secretReferenceName %q names no entry of spec.resources", ref)})
		}
		return out
	}
	return nil
}

// lookup follows a dotted path through nested maps; nil when any part is missing.
func lookup(obj map[string]any, path string) any {
	var cur any = obj
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// set: present and not empty (strings, lists and objects).
func set(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case string:
		return t != ""
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	}
	return true
}

// AtLeast reports whether the Kubernetes version (1.34.2, v1.34.0-rc.1...) is at least
// major.minor (prereleases count, as Gardener's ">= 1.34-0" constraint does). An unparsable
// version is not.
func AtLeast(version, minimum string) bool {
	vMaj, vMin, ok := majorMinor(version)
	mMaj, mMin, ok2 := majorMinor(minimum)
	if !ok || !ok2 {
		return false
	}
	return vMaj > mMaj || (vMaj == mMaj && vMin >= mMin)
}

func majorMinor(v string) (int, int, bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return maj, minor, err1 == nil && err2 == nil
}
