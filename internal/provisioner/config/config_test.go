package config_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

// emptyEnvironment unsets every APP_* variable for the test.
func emptyEnvironment(t *testing.T) {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "APP_") {
			t.Setenv(name, "") // restores the value after the test
			require.NoError(t, os.Unsetenv(name))
		}
	}
}

// TestSeedDefaults: every default of seed 000's table, from an empty environment, in the
// configuration that reads it (the provisioner's, the Director client's, the database's).
func TestSeedDefaults(t *testing.T) {
	emptyEnvironment(t)
	cfg, err := config.Load()
	require.NoError(t, err)
	var dir director.Config
	require.NoError(t, envconfig.Process("APP", &dir))
	var db driver.Config
	require.NoError(t, envconfig.Process("APP", &db))

	for name, got := range map[string][2]any{
		"APP_ADDRESS":                                  {cfg.Address, "127.0.0.1:3000"},
		"APP_API_ENDPOINT":                             {cfg.APIEndpoint, "/graphql"},
		"APP_PLAYGROUND_API_ENDPOINT":                  {cfg.PlaygroundAPIEndpoint, "/graphql"},
		"APP_CREDENTIALS_NAMESPACE":                    {cfg.CredentialsNamespace, "compass-system"},
		"APP_DIRECTOR_URL":                             {dir.URL, "https://compass-gateway-auth-oauth.kyma.local/director/graphql"},
		"APP_SKIP_DIRECTOR_CERT_VERIFICATION":          {dir.SkipCertVerify, false},
		"APP_OAUTH_CREDENTIALS_SECRET_NAME":            {cfg.OAuthCredentialsSecret, "compass-provisioner-credentials"},
		"APP_DATABASE_USER":                            {db.User, "postgres"},
		"APP_DATABASE_PASSWORD":                        {db.Password, "password"},
		"APP_DATABASE_HOST":                            {db.Host, "localhost"},
		"APP_DATABASE_PORT":                            {db.Port, 5432},
		"APP_DATABASE_NAME":                            {db.Name, "provisioner"},
		"APP_DATABASE_SSL_MODE":                        {db.SSLMode, "disable"},
		"APP_PROVISIONING_TIMEOUT_INSTALLATION":        {cfg.Provisioning.Installation, 60 * time.Minute},
		"APP_PROVISIONING_TIMEOUT_UPGRADE":             {cfg.Provisioning.Upgrade, 60 * time.Minute},
		"APP_PROVISIONING_TIMEOUT_AGENT_CONFIGURATION": {cfg.Provisioning.AgentConfiguration, 15 * time.Minute},
		"APP_PROVISIONING_TIMEOUT_AGENT_CONNECTION":    {cfg.Provisioning.AgentConnection, 15 * time.Minute},
		"APP_GARDENER_PROJECT":                         {cfg.GardenerProject, "gardenerProject"},
		"APP_GARDENER_KUBECONFIG_PATH":                 {cfg.GardenerKubeconfigPath, "./dev/kubeconfig.yaml"},
		"APP_GARDENER_AUDIT_LOGS_POLICY_CONFIG_MAP":    {cfg.GardenerAuditLogsPolicy, ""}, // "optional"
		"APP_GARDENER_AUDIT_LOGS_TENANT":               {cfg.GardenerAuditLogsTenant, ""}, // "optional"
		"APP_GARDENER_AUDIT_LOG_SERVICE_URL":           {cfg.GardenerAuditLogServiceURL, ""},
		"APP_GARDENER_AUDIT_LOG_SECRET_NAME":           {cfg.GardenerAuditLogSecretName, ""},
		"APP_GARDENER_CLOUD_PROFILE_OPENSTACK":         {cfg.GardenerCloudProfileOpenStack, ""},
		"APP_ENQUEUE_IN_PROGRESS_OPERATIONS":           {cfg.EnqueueInProgressOperations, true},
	} {
		assert.Equal(t, got[1], got[0], name)
	}
}

// TestSeedVariablesAreRead: each variable of the table is read (a value set is the value seen).
func TestSeedVariablesAreRead(t *testing.T) {
	emptyEnvironment(t)
	for name, value := range map[string]string{
		"APP_ADDRESS": "0.0.0.0:4000", "APP_API_ENDPOINT": "/api", "APP_PLAYGROUND_API_ENDPOINT": "/play",
		"APP_CREDENTIALS_NAMESPACE": "kcp-system", "APP_OAUTH_CREDENTIALS_SECRET_NAME": "creds",
		"APP_PROVISIONING_TIMEOUT_INSTALLATION": "1h30m", "APP_GARDENER_PROJECT": "frog",
		"APP_GARDENER_AUDIT_LOGS_TENANT": "audit", "APP_ENQUEUE_IN_PROGRESS_OPERATIONS": "false",
	} {
		t.Setenv(name, value)
	}
	cfg, err := config.Load()
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:4000", cfg.Address)
	assert.Equal(t, "/api", cfg.APIEndpoint)
	assert.Equal(t, "/play", cfg.PlaygroundAPIEndpoint)
	assert.Equal(t, "kcp-system", cfg.CredentialsNamespace)
	assert.Equal(t, "creds", cfg.OAuthCredentialsSecret)
	assert.Equal(t, 90*time.Minute, cfg.Provisioning.Installation)
	assert.Equal(t, "frog", cfg.GardenerProject)
	assert.Equal(t, "audit", cfg.GardenerAuditLogsTenant)
	assert.False(t, cfg.EnqueueInProgressOperations)
}
