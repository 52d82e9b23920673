package overrides

import (
	"fmt"
	"os"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"sigs.k8s.io/yaml"
)

// Defaults are the overrides every runtime gets from configuration, with per-plan additions.
type Defaults struct {
	components map[string][]Entry
	plans      map[string]map[string][]Entry
}

type fileEntry struct {
	Key          string  `json:"key"`
	Value        *string `json:"value"`
	ValueFromEnv string  `json:"valueFromEnv"`
}

type file struct {
	Components map[string][]fileEntry            `json:"components"`
	Plans      map[string]map[string][]fileEntry `json:"plans"`
}

// ParseDefaults reads a defaults file (see resources/overrides.yaml); getenv resolves
// valueFromEnv entries, which become secret entries. Every problem names its place in the file.
func ParseDefaults(data []byte, getenv func(string) (string, bool)) (Defaults, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return Defaults{}, fmt.Errorf("parsing overrides: %w", err)
	}
	d := Defaults{components: map[string][]Entry{}, plans: map[string]map[string][]Entry{}}
	convert := func(path string, in map[string][]fileEntry) (map[string][]Entry, error) {
		out := map[string][]Entry{}
		for comp, entries := range in {
			for i, e := range entries {
				at := fmt.Sprintf("%s.%s[%d]", path, comp, i)
				if strings.TrimSpace(e.Key) == "" {
					return nil, fmt.Errorf("overrides %s.key is empty", at)
				}
				switch {
				case e.Value != nil && e.ValueFromEnv != "":
					return nil, fmt.Errorf("overrides %s: set value or valueFromEnv, not both", at)
				case e.ValueFromEnv != "":
					v, ok := getenv(e.ValueFromEnv)
					if !ok {
						return nil, fmt.Errorf("overrides %s.valueFromEnv: environment variable %s is not set", at, e.ValueFromEnv)
					}
					out[comp] = append(out[comp], Entry{Key: e.Key, Value: v, Secret: true})
				case e.Value != nil:
					out[comp] = append(out[comp], Entry{Key: e.Key, Value: *e.Value})
				default:
					return nil, fmt.Errorf("overrides %s: value or valueFromEnv is required", at)
				}
			}
		}
		return out, nil
	}
	var err error
	if d.components, err = convert("components", f.Components); err != nil {
		return Defaults{}, err
	}
	for plan, comps := range f.Plans {
		if d.plans[plan], err = convert("plans."+plan, comps); err != nil {
			return Defaults{}, err
		}
	}
	return d, nil
}

// LoadDefaults reads the defaults file at path, or data when path is empty.
func LoadDefaults(path string, data []byte) (Defaults, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Defaults{}, fmt.Errorf("reading overrides file: %w", err)
		}
		data = b
	}
	return ParseDefaults(data, os.LookupEnv)
}

// Apply sets the defaults for plan (common entries, then the plan's) into o.
func (d Defaults) Apply(o *Overrides, secrets *storage.Secrets, plan string) {
	for _, src := range []map[string][]Entry{d.components, d.plans[plan]} {
		for _, c := range Overrides(src).Components() {
			o.Set(secrets, c, src[c]...)
		}
	}
}
