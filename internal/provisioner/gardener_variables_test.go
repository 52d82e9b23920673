package provisioner_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
)

func gardenerSpecs(t *testing.T, b infrastructure.Config) (map[string]map[string]any, string) {
	t.Helper()
	entries, def, err := infrastructure.LoadSet(b)
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for _, e := range entries {
		var spec map[string]any
		require.NoError(t, json.Unmarshal(e.Spec, &spec))
		spec["_type"] = e.Type
		out[e.Name] = spec
	}
	return out, def
}

// TestGardenerVariables: APP_GARDENER_* configure the gardener backend whenever they are set.
func TestGardenerVariables(t *testing.T) {
	cfg, err := config.Load()
	require.NoError(t, err)
	cfg.GardenerProject, cfg.GardenerKubeconfigPath = "frog", "/etc/garden/kubeconfig"
	cfg.GardenerAuditLogsPolicy, cfg.GardenerAuditLogsTenant = "audit-policy", "audit-tenant"
	cfg.GardenerAuditLogServiceURL, cfg.GardenerAuditLogSecretName = "https://auditlog.example.com", "auditlog-secret"
	cfg.GardenerCloudProfileOpenStack, cfg.GardenerOpenStackFloatingPoolName, cfg.GardenerOpenStackLoadBalancerProvider = "converged-cloud", "fip", "f5"
	cfg.GardenerKubeconfigExpirationSeconds = 7200
	all := []string{"APP_GARDENER_PROJECT=frog", "APP_GARDENER_KUBECONFIG_PATH=/etc/garden/kubeconfig",
		"APP_GARDENER_AUDIT_LOGS_POLICY_CONFIG_MAP=audit-policy", "APP_GARDENER_AUDIT_LOGS_TENANT=audit-tenant",
		"APP_GARDENER_AUDIT_LOG_SERVICE_URL=https://auditlog.example.com", "APP_GARDENER_AUDIT_LOG_SECRET_NAME=auditlog-secret",
		"APP_GARDENER_CLOUD_PROFILE_OPENSTACK=converged-cloud", "APP_GARDENER_OPENSTACK_FLOATING_POOL_NAME=fip",
		"APP_GARDENER_OPENSTACK_LOAD_BALANCER_PROVIDER=f5", "APP_GARDENER_KUBECONFIG_EXPIRATION_SECONDS=7200"}
	mapped := map[string]any{"_type": "gardener", "project": "frog", "kubeconfig_path": "/etc/garden/kubeconfig",
		"audit_logs_policy_config_map": "audit-policy", "audit_logs_tenant": "audit-tenant",
		"audit_log_service_url": "https://auditlog.example.com", "audit_log_secret_name": "auditlog-secret",
		"cloud_profile_openstack": "converged-cloud", "openstack_floating_pool_name": "fip", "openstack_load_balancer_provider": "f5",
		"kubeconfig_expiration_seconds": float64(7200)}

	// Nothing set: the default set stays (simulated).
	b, err := provisioner.GardenerVariables(infrastructure.Config{}, cfg, nil)
	require.NoError(t, err)
	assert.Equal(t, infrastructure.Config{}, b)

	// Set, no provisioner set: a gardener set of one, every variable mapped.
	b, err = provisioner.GardenerVariables(infrastructure.Config{}, cfg, all)
	require.NoError(t, err)
	specs, def := gardenerSpecs(t, b)
	assert.Equal(t, "gardener", def)
	assert.Equal(t, map[string]map[string]any{"gardener": mapped}, specs)

	// Only APP_DEFAULT_PROVISIONER=gardener: the seed's defaults fill the rest.
	b, err = provisioner.GardenerVariables(infrastructure.Config{Default: "gardener"}, cfg, nil)
	require.NoError(t, err)
	specs, _ = gardenerSpecs(t, b)
	assert.Equal(t, "frog", specs["gardener"]["project"])

	// A set with gardener entries: the variables fill what the entries leave out.
	set := `{"garden": {"type": "gardener", "spec": {"kubeconfig_path": "/etc/garden/kubeconfig"}},
		"sim": {"type": "simulated"}}`
	b, err = provisioner.GardenerVariables(infrastructure.Config{SetJSON: set, Default: "sim"}, cfg, all)
	require.NoError(t, err)
	specs, def = gardenerSpecs(t, b)
	assert.Equal(t, "sim", def)
	assert.Equal(t, mapped, specs["garden"])

	// A number in the set equal to the variable is fine; another one is an error.
	_, err = provisioner.GardenerVariables(infrastructure.Config{SetJSON: `{"garden": {"type": "gardener", "spec": {"kubeconfig_expiration_seconds": 7200}}}`}, cfg, all)
	require.NoError(t, err)
	_, err = provisioner.GardenerVariables(infrastructure.Config{SetJSON: `{"garden": {"type": "gardener", "spec": {"kubeconfig_expiration_seconds": 900}}}`}, cfg, all)
	assert.ErrorContains(t, err, `spec.kubeconfig_expiration_seconds is 900 but APP_GARDENER_KUBECONFIG_EXPIRATION_SECONDS is "7200"`)
	assert.Equal(t, map[string]any{"_type": "simulated"}, specs["sim"])

	// Set unset: the set is left as it is.
	unchanged := infrastructure.Config{SetJSON: set, Default: "sim"}
	b, err = provisioner.GardenerVariables(unchanged, cfg, nil)
	require.NoError(t, err)
	assert.Equal(t, unchanged, b)

	// One of the two would be ignored: errors naming both.
	_, err = provisioner.GardenerVariables(infrastructure.Config{SetJSON: `{"garden": {"type": "gardener", "spec": {"project": "toad"}}}`}, cfg, all)
	assert.ErrorContains(t, err, `spec.project is toad but APP_GARDENER_PROJECT is "frog"`)
	_, err = provisioner.GardenerVariables(infrastructure.Config{SetJSON: `{"sim": {"type": "simulated"}}`}, cfg, all[:1])
	assert.ErrorContains(t, err, "APP_GARDENER_PROJECT is set but the set has no gardener entry")
	_, err = provisioner.GardenerVariables(infrastructure.Config{Default: "simulated"}, cfg, all[:1])
	assert.ErrorContains(t, err, `APP_GARDENER_PROJECT is set but no set is configured and the default provisioner is "simulated"`)

	// The provisioner builds its gardener backend from them.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{ // a garden nobody listens on: nothing connects before a call
		Clusters:       map[string]*clientcmdapi.Cluster{"garden": {Server: "https://127.0.0.1:1"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"garden": {Token: "t"}},
		Contexts:       map[string]*clientcmdapi.Context{"garden": {Cluster: "garden", AuthInfo: "garden"}},
		CurrentContext: "garden",
	}, kc))
	cfg.GardenerKubeconfigPath = kc
	p, err := provisioner.New(context.Background(), openStore(t), provisioner.Options{Config: cfg, Environ: []string{"APP_GARDENER_PROJECT=frog", "APP_GARDENER_KUBECONFIG_PATH=" + kc}, Log: quiet()})
	require.NoError(t, err)
	assert.Equal(t, []string{"gardener"}, p.Backends.Names())
	typ, err := p.Backends.Type("")
	require.NoError(t, err)
	assert.Equal(t, "gardener", typ)
}
