package provisioner

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener"
)

// gardenerVariable maps an APP_GARDENER_* variable (seed 000) to the gardener spec field it sets.
type gardenerVariable struct {
	env, field string
	value      func(config.Config) string
}

var gardenerVariables = []gardenerVariable{
	{"APP_GARDENER_PROJECT", "project", func(c config.Config) string { return c.GardenerProject }},
	{"APP_GARDENER_KUBECONFIG_PATH", "kubeconfig_path", func(c config.Config) string { return c.GardenerKubeconfigPath }},
	{"APP_GARDENER_AUDIT_LOGS_POLICY_CONFIG_MAP", "audit_logs_policy_config_map", func(c config.Config) string { return c.GardenerAuditLogsPolicy }},
	{"APP_GARDENER_AUDIT_LOGS_TENANT", "audit_logs_tenant", func(c config.Config) string { return c.GardenerAuditLogsTenant }},
}

// GardenerVariables makes the seed's APP_GARDENER_* variables configure the gardener backend
// whenever they are set (environ is the process environment):
//
//   - no provisioner set configured: the set is one gardener entry named "gardener" built from
//     them (their defaults fill what is not set), when any of them is set or
//     APP_DEFAULT_PROVISIONER is "gardener";
//   - a set with gardener entries: each set variable fills its field in every gardener entry
//     that leaves it out; an entry that gives the field another value is an error (one of the
//     two would be ignored);
//   - a set without a gardener entry while one of them is set: an error, for the same reason.
func GardenerVariables(b infrastructure.Config, cfg config.Config, environ []string) (infrastructure.Config, error) {
	set := map[string]bool{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if value != "" {
			set[name] = true
		}
	}
	var explicit []gardenerVariable
	for _, v := range gardenerVariables {
		if set[v.env] {
			explicit = append(explicit, v)
		}
	}
	configured := b.SetJSON != "" || b.SetFile != "" || b.RillSetJSON != ""
	if !configured {
		def := b.Default
		if def == "" {
			def = b.RillDefault
		}
		if len(explicit) == 0 && def != "gardener" {
			return b, nil
		}
		if def != "" && def != "gardener" {
			return b, fmt.Errorf("provisioner set: %s is set but no set is configured and the default provisioner is %q, not \"gardener\"", explicit[0].env, def)
		}
		spec := map[string]string{}
		for _, v := range gardenerVariables {
			if val := v.value(cfg); val != "" {
				spec[v.field] = val
			}
		}
		raw, err := json.Marshal(map[string]any{"gardener": map[string]any{"type": gardener.Type, "spec": spec}})
		if err != nil {
			return b, fmt.Errorf("building the gardener provisioner from APP_GARDENER_*: %w", err)
		}
		b.SetJSON, b.Default = string(raw), "gardener"
		return b, nil
	}
	if len(explicit) == 0 {
		return b, nil
	}
	entries, def, err := infrastructure.LoadSet(b)
	if err != nil {
		return b, err
	}
	doc := map[string]any{}
	found := false
	for _, e := range entries {
		var spec map[string]any
		if err := json.Unmarshal(e.Spec, &spec); err != nil {
			return b, fmt.Errorf("provisioner set entry %q: %w", e.Name, err)
		}
		if e.Type == gardener.Type {
			found = true
			for _, v := range explicit {
				cur, has := spec[v.field]
				switch {
				case !has || cur == "":
					spec[v.field] = v.value(cfg)
				case cur != v.value(cfg):
					return b, fmt.Errorf("provisioner set entry %q: spec.%s is %v but %s is %q: set only one", e.Name, v.field, cur, v.env, v.value(cfg))
				}
			}
		}
		doc[e.Name] = map[string]any{"type": e.Type, "spec": spec}
	}
	if !found {
		return b, fmt.Errorf("provisioner set: %s is set but the set has no gardener entry for it to configure", explicit[0].env)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return b, fmt.Errorf("provisioner set: %w", err)
	}
	return infrastructure.Config{SetJSON: string(raw), Default: def}, nil
}
