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
	// value is the field's value (a string, or an int64 for numbers); the zero value is unset.
	value func(config.Config) any
}

var gardenerVariables = []gardenerVariable{
	{"APP_GARDENER_PROJECT", "project", func(c config.Config) any { return c.GardenerProject }},
	{"APP_GARDENER_KUBECONFIG_PATH", "kubeconfig_path", func(c config.Config) any { return c.GardenerKubeconfigPath }},
	{"APP_GARDENER_AUDIT_LOGS_POLICY_CONFIG_MAP", "audit_logs_policy_config_map", func(c config.Config) any { return c.GardenerAuditLogsPolicy }},
	{"APP_GARDENER_AUDIT_LOGS_TENANT", "audit_logs_tenant", func(c config.Config) any { return c.GardenerAuditLogsTenant }},
	{"APP_GARDENER_AUDIT_LOG_SERVICE_URL", "audit_log_service_url", func(c config.Config) any { return c.GardenerAuditLogServiceURL }},
	{"APP_GARDENER_AUDIT_LOG_SECRET_NAME", "audit_log_secret_name", func(c config.Config) any { return c.GardenerAuditLogSecretName }},
	{"APP_GARDENER_CLOUD_PROFILE_AWS", "cloud_profile_aws", func(c config.Config) any { return c.GardenerCloudProfileAWS }},
	{"APP_GARDENER_CLOUD_PROFILE_GCP", "cloud_profile_gcp", func(c config.Config) any { return c.GardenerCloudProfileGCP }},
	{"APP_GARDENER_CLOUD_PROFILE_AZURE", "cloud_profile_azure", func(c config.Config) any { return c.GardenerCloudProfileAzure }},
	{"APP_GARDENER_CLOUD_PROFILE_OPENSTACK", "cloud_profile_openstack", func(c config.Config) any { return c.GardenerCloudProfileOpenStack }},
	{"APP_GARDENER_OPENSTACK_FLOATING_POOL_NAME", "openstack_floating_pool_name", func(c config.Config) any { return c.GardenerOpenStackFloatingPoolName }},
	{"APP_GARDENER_OPENSTACK_LOAD_BALANCER_PROVIDER", "openstack_load_balancer_provider", func(c config.Config) any { return c.GardenerOpenStackLoadBalancerProvider }},
	{"APP_GARDENER_KUBECONFIG_EXPIRATION_SECONDS", "kubeconfig_expiration_seconds", func(c config.Config) any { return c.GardenerKubeconfigExpirationSeconds }},
}

// unset: the zero value of a variable's field.
func unset(v any) bool { return v == nil || v == "" || v == int64(0) }

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
		spec := map[string]any{}
		for _, v := range gardenerVariables {
			if val := v.value(cfg); !unset(val) {
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
				case !has || cur == "" || cur == float64(0):
					spec[v.field] = v.value(cfg)
				case fmt.Sprint(cur) != fmt.Sprint(v.value(cfg)):
					return b, fmt.Errorf("provisioner set entry %q: spec.%s is %v but %s is %q: set only one", e.Name, v.field, cur, v.env, fmt.Sprint(v.value(cfg)))
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
