// Package contracttest is the contract of client.Client: what a user of the Runtime Provisioner
// (the broker) relies on, run against every implementation (in-process and GraphQL over HTTP).
package contracttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

const (
	// OperationTimeout bounds how long an operation may take to succeed; the service under
	// test is expected to simulate its durations fast.
	OperationTimeout = 60 * time.Second
	pollInterval     = 50 * time.Millisecond

	tenantA = "tenant-a"
	tenantB = "tenant-b"

	secretValue = "s3cr3t-value"
)

// Run runs the contract against clients made by newClient, one fresh client (and service)
// per subtest. Subtests run in parallel.
func Run(t *testing.T, newClient func(t *testing.T) client.Client) {
	t.Helper()
	for _, tc := range []struct {
		name string
		test func(t *testing.T, c client.Client)
	}{
		{"ProvisionRuntimeStartsAnOperation", provisionRuntimeStartsAnOperation},
		{"ProvisionRuntimeWithoutKymaConfigIsNoInstall", provisionRuntimeWithoutKymaConfigIsNoInstall},
		{"ProvisionedRuntimeHasItsStatusAndConfiguration", provisionedRuntimeHasItsStatusAndConfiguration},
		{"SecondOperationWhileOneRunsIsConflict", secondOperationWhileOneRunsIsConflict},
		{"OtherTenantGetsNotFound", otherTenantGetsNotFound},
		{"UnknownIDsAreNotFound", unknownIDsAreNotFound},
		{"ProvisionRuntimeValidatesItsInput", provisionRuntimeValidatesItsInput},
		{"ProvisionRuntimeRequiresTenant", provisionRuntimeRequiresTenant},
		{"DeprovisionRuntimeRemovesTheRuntime", deprovisionRuntimeRemovesTheRuntime},
		{"UpgradeShootSucceeds", upgradeShootSucceeds},
		{"UpgradeRuntimeSucceeds", upgradeRuntimeSucceeds},
		{"HibernateRuntimeSucceeds", hibernateRuntimeSucceeds},
		{"ReconnectRuntimeAgentReturnsAnOperation", reconnectRuntimeAgentReturnsAnOperation},
		{"ResultsAreNotShared", resultsAreNotShared},
		{"RuntimeCredentialsAreCheckedAndScoped", runtimeCredentialsAreCheckedAndScoped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newClient(t))
		})
	}
}

// ProvisionInput is a valid provisioning request: a GCP cluster with Kyma, whose configuration
// has secret and non-secret entries.
func ProvisionInput(name string) gqlschema.ProvisionRuntimeInput {
	profile := gqlschema.KymaProfileProduction
	return gqlschema.ProvisionRuntimeInput{
		RuntimeInput: &gqlschema.RuntimeInput{
			Name:        name,
			Description: ptr("contract test runtime"),
			Labels:      gqlschema.Labels{"broker_instance_id": "instance-1", "global_subaccount_id": "subaccount-1"},
		},
		ClusterConfig: &gqlschema.ClusterConfigInput{
			GardenerConfig: &gqlschema.GardenerConfigInput{
				Name:              ptr("c-" + name),
				KubernetesVersion: "1.30",
				Provider:          "gcp",
				TargetSecret:      "gardener-secret-gcp",
				Region:            "europe-west3",
				MachineType:       "n2-standard-4",
				MachineImage:      ptr("gardenlinux"),
				DiskType:          ptr("pd-standard"),
				VolumeSizeGb:      ptr(50),
				WorkerCidr:        "10.250.0.0/16",
				AutoScalerMin:     3,
				AutoScalerMax:     4,
				MaxSurge:          1,
				MaxUnavailable:    0,
				PodsCidr:          ptr("100.64.0.0/12"),
				ServicesCidr:      ptr("100.104.0.0/13"),
				Purpose:           ptr("production"),
				ProviderSpecificConfig: &gqlschema.ProviderSpecificInput{
					GCPConfig: &gqlschema.GCPProviderConfigInput{Zones: []string{"europe-west3-a", "europe-west3-b"}},
				},
				DNSConfig: &gqlschema.DNSConfigInput{Domain: name + ".custom.example", Providers: []*gqlschema.DNSProviderInput{
					{DomainsInclude: []string{name + ".custom.example"}, Primary: true, SecretName: "dns-secret", Type: "aws-route53"},
				}},
				ControlPlaneFailureTolerance:  ptr("zone"),
				ShootNetworkingFilterDisabled: ptr(false),
				EuAccess:                      ptr(true),
			},
			Administrators: []string{"admin@example.com"},
		},
		KymaConfig: &gqlschema.KymaConfigInput{
			Version: "2.20.0",
			Profile: &profile,
			Components: []*gqlschema.ComponentConfigurationInput{
				{
					Component: "istio",
					Namespace: "istio-system",
					Configuration: []*gqlschema.ConfigEntryInput{
						{Key: "gateway.password", Value: secretValue, Secret: ptr(true)},
						{Key: "gateway.replicas", Value: "2"},
					},
				},
				{Component: "serverless", Namespace: "kyma-system"},
			},
			Configuration: []*gqlschema.ConfigEntryInput{
				{Key: "global.token", Value: secretValue, Secret: ptr(true)},
				{Key: "global.domain", Value: "example.com", Secret: ptr(false)},
			},
		},
	}
}

func provisionRuntimeStartsAnOperation(t *testing.T, c client.Client) {
	status, err := c.ProvisionRuntime(context.Background(), tenantA, ProvisionInput("rt-start"))

	require.NoError(t, err)
	require.NotNil(t, status)
	assert.Equal(t, gqlschema.OperationTypeProvision, status.Operation)
	assert.Contains(t, []gqlschema.OperationState{gqlschema.OperationStatePending, gqlschema.OperationStateInProgress}, status.State)
	assert.NotEmpty(t, deref(status.ID), "operation id")
	assert.NotEmpty(t, deref(status.RuntimeID), "runtime id")

	succeeded := WaitForOperation(t, c, tenantA, deref(status.ID))
	assert.Equal(t, gqlschema.OperationTypeProvision, succeeded.Operation)
	assert.Equal(t, deref(status.RuntimeID), deref(succeeded.RuntimeID))
}

func provisionRuntimeWithoutKymaConfigIsNoInstall(t *testing.T, c client.Client) {
	input := ProvisionInput("rt-no-install")
	input.KymaConfig = nil

	status, err := c.ProvisionRuntime(context.Background(), tenantA, input)

	require.NoError(t, err)
	assert.Equal(t, gqlschema.OperationTypeProvisionNoInstall, status.Operation)
	assert.NotEmpty(t, deref(status.RuntimeID))
	WaitForOperation(t, c, tenantA, deref(status.ID))
}

func provisionedRuntimeHasItsStatusAndConfiguration(t *testing.T, c client.Client) {
	input := ProvisionInput("rt-status")
	runtimeID, operationID := Provision(t, c, tenantA, input)

	status, err := c.RuntimeStatus(context.Background(), tenantA, runtimeID)

	require.NoError(t, err)
	require.NotNil(t, status)
	require.NotNil(t, status.LastOperationStatus, "lastOperationStatus")
	assert.Equal(t, operationID, deref(status.LastOperationStatus.ID))
	assert.Equal(t, gqlschema.OperationTypeProvision, status.LastOperationStatus.Operation)
	assert.Equal(t, gqlschema.OperationStateSucceeded, status.LastOperationStatus.State)
	assert.Equal(t, runtimeID, deref(status.LastOperationStatus.RuntimeID))

	require.NotNil(t, status.RuntimeConfiguration, "runtimeConfiguration")
	cluster := status.RuntimeConfiguration.ClusterConfig
	require.NotNil(t, cluster, "runtimeConfiguration.clusterConfig")
	in := input.ClusterConfig.GardenerConfig
	assert.Equal(t, in.KubernetesVersion, deref(cluster.KubernetesVersion))
	assert.Equal(t, in.Provider, deref(cluster.Provider))
	assert.Equal(t, in.Region, deref(cluster.Region))
	assert.Equal(t, in.MachineType, deref(cluster.MachineType))
	assert.Equal(t, in.WorkerCidr, deref(cluster.WorkerCidr))
	assert.Equal(t, in.AutoScalerMin, deref(cluster.AutoScalerMin))
	assert.Equal(t, in.AutoScalerMax, deref(cluster.AutoScalerMax))
	assert.Equal(t, in.MaxSurge, deref(cluster.MaxSurge))
	assert.Equal(t, in.MaxUnavailable, deref(cluster.MaxUnavailable))
	assert.Equal(t, deref(in.VolumeSizeGb), deref(cluster.VolumeSizeGb))
	require.IsType(t, &gqlschema.GCPProviderConfig{}, cluster.ProviderSpecificConfig, "providerSpecificConfig")
	assert.Equal(t, in.ProviderSpecificConfig.GCPConfig.Zones, cluster.ProviderSpecificConfig.(*gqlschema.GCPProviderConfig).Zones)
	assert.Equal(t, deref(in.PodsCidr), deref(cluster.PodsCidr))
	assert.Equal(t, deref(in.ServicesCidr), deref(cluster.ServicesCidr))
	assert.Equal(t, deref(in.ControlPlaneFailureTolerance), deref(cluster.ControlPlaneFailureTolerance))
	assert.Equal(t, in.ShootNetworkingFilterDisabled, cluster.ShootNetworkingFilterDisabled)
	assert.Equal(t, in.EuAccess, cluster.EuAccess)
	require.NotNil(t, cluster.DNSConfig, "dnsConfig")
	assert.Equal(t, in.DNSConfig.Domain, cluster.DNSConfig.Domain)
	require.Len(t, cluster.DNSConfig.Providers, 1)
	assert.Equal(t, gqlschema.DNSProvider{DomainsInclude: in.DNSConfig.Providers[0].DomainsInclude, Primary: true, SecretName: "dns-secret", Type: "aws-route53"},
		*cluster.DNSConfig.Providers[0])

	kyma := status.RuntimeConfiguration.KymaConfig
	require.NotNil(t, kyma, "runtimeConfiguration.kymaConfig")
	assert.Equal(t, input.KymaConfig.Version, deref(kyma.Version))
	assert.Equal(t, input.KymaConfig.Profile, kyma.Profile)
	require.Len(t, kyma.Components, len(input.KymaConfig.Components))
	assert.Equal(t, "istio", kyma.Components[0].Component)
	assert.Equal(t, "istio-system", kyma.Components[0].Namespace)

	// Secret configuration values never come back in clear; the others do.
	entries := append([]*gqlschema.ConfigEntry{}, kyma.Configuration...)
	for _, component := range kyma.Components {
		entries = append(entries, component.Configuration...)
	}
	values := map[string]string{}
	for _, entry := range entries {
		require.NotNil(t, entry)
		values[entry.Key] = entry.Value
		if deref(entry.Secret) {
			assert.NotEqual(t, secretValue, entry.Value, "secret entry %s returned in clear", entry.Key)
		}
	}
	assert.Equal(t, "example.com", values["global.domain"])
	assert.Equal(t, "2", values["gateway.replicas"])
	assert.Contains(t, values, "global.token")
	assert.Contains(t, values, "gateway.password")
	assert.NotEqual(t, secretValue, values["global.token"])
	assert.NotEqual(t, secretValue, values["gateway.password"])

	// The configuration alone is the status's.
	rc, err := c.RuntimeConfiguration(context.Background(), tenantA, runtimeID)
	require.NoError(t, err)
	assert.Equal(t, status.RuntimeConfiguration, rc)
}

func secondOperationWhileOneRunsIsConflict(t *testing.T, c client.Client) {
	ctx := context.Background()
	// The simulated provisioning may be fast: try a few runtimes until the second mutation
	// meets the first operation still running.
	const attempts = 5
	for i := range attempts {
		status, err := c.ProvisionRuntime(ctx, tenantA, ProvisionInput(fmt.Sprintf("rt-conflict-%d", i)))
		require.NoError(t, err)
		runtimeID, operationID := deref(status.RuntimeID), deref(status.ID)

		_, err = c.UpgradeShoot(ctx, tenantA, runtimeID, UpgradeShootInput())
		if err == nil {
			current, statusErr := c.RuntimeOperationStatus(ctx, tenantA, operationID)
			require.NoError(t, statusErr)
			require.Equal(t, gqlschema.OperationStateSucceeded, current.State,
				"upgradeShoot was accepted while provisioning was %s", current.State)
			t.Logf("provisioning %s finished before the second mutation; trying again", operationID)
			continue
		}
		assertCode(t, apperr.CodeConflict, err)

		_, err = c.HibernateRuntime(ctx, tenantA, runtimeID)
		if err != nil {
			assertCode(t, apperr.CodeConflict, err)
		}
		// The running operation is not disturbed.
		WaitForOperation(t, c, tenantA, operationID)
		return
	}
	t.Fatalf("provisioning always finished before a second mutation in %d attempts; the simulated durations are too short to observe a running operation", attempts)
}

func otherTenantGetsNotFound(t *testing.T, c client.Client) {
	ctx := context.Background()
	runtimeID, operationID := Provision(t, c, tenantA, ProvisionInput("rt-tenant"))

	_, err := c.RuntimeStatus(ctx, tenantB, runtimeID)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.RuntimeConfiguration(ctx, tenantB, runtimeID)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.RuntimeOperationStatus(ctx, tenantB, operationID)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.DeprovisionRuntime(ctx, tenantB, runtimeID)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.UpgradeShoot(ctx, tenantB, runtimeID, UpgradeShootInput())
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.HibernateRuntime(ctx, tenantB, runtimeID)
	assertCode(t, apperr.CodeNotFound, err)

	// The owner still sees its runtime, untouched.
	status, err := c.RuntimeStatus(ctx, tenantA, runtimeID)
	require.NoError(t, err)
	require.NotNil(t, status.LastOperationStatus)
	assert.Equal(t, operationID, deref(status.LastOperationStatus.ID))
}

// runtimeCredentialsAreCheckedAndScoped: createRuntimeCredentials checks its input, finds only
// the tenant's runtimes, and is NOT_SUPPORTED for a backend without scoped credentials (the
// simulated one the contract runs on; static and kubernetes are tested on a real API server).
func runtimeCredentialsAreCheckedAndScoped(t *testing.T, c client.Client) {
	ctx := context.Background()
	id, _ := Provision(t, c, tenantA, ProvisionInput("creds"))
	for _, tc := range []struct {
		name    string
		seconds int
		field   string
	}{{"binding-1", 599, "expirationSeconds"}, {"binding-1", 7776001, "expirationSeconds"}, {"Not_A_Name", 600, "name"}, {"runtime", 600, "name"}} {
		_, err := c.CreateRuntimeCredentials(ctx, tenantA, id, tc.name, tc.seconds)
		e := assertCode(t, apperr.CodeBadRequest, err)
		if e != nil {
			assert.Equal(t, tc.field, e.Field, "%+v", tc)
		}
	}
	_, err := c.CreateRuntimeCredentials(ctx, tenantB, id, "binding-1", 600)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.CreateRuntimeCredentials(ctx, tenantA, id, "binding-1", 600)
	assertCode(t, apperr.CodeNotSupported, err)
	_, err = c.RevokeRuntimeCredentials(ctx, tenantA, id, "binding-1")
	assertCode(t, apperr.CodeNotSupported, err)
	st, err := c.RuntimeStatus(ctx, tenantA, id)
	require.NoError(t, err)
	assert.Nil(t, st.RuntimeConfiguration.Allocation, "a simulated runtime is not allocated")
}

func unknownIDsAreNotFound(t *testing.T, c client.Client) {
	ctx := context.Background()
	const unknown = "00000000-0000-0000-0000-000000000000"

	_, err := c.RuntimeStatus(ctx, tenantA, unknown)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.RuntimeConfiguration(ctx, tenantA, unknown)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.RuntimeOperationStatus(ctx, tenantA, unknown)
	assertCode(t, apperr.CodeNotFound, err)
	_, err = c.DeprovisionRuntime(ctx, tenantA, unknown)
	assertCode(t, apperr.CodeNotFound, err)
}

func provisionRuntimeValidatesItsInput(t *testing.T, c client.Client) {
	for name, tc := range map[string]struct {
		modify func(*gqlschema.ProvisionRuntimeInput)
		field  string
	}{
		"missing name": {
			modify: func(in *gqlschema.ProvisionRuntimeInput) { in.RuntimeInput.Name = "" },
			field:  "config.runtimeInput.name",
		},
		"autoScalerMin above autoScalerMax": {
			modify: func(in *gqlschema.ProvisionRuntimeInput) {
				in.ClusterConfig.GardenerConfig.AutoScalerMin = 5
				in.ClusterConfig.GardenerConfig.AutoScalerMax = 2
			},
			field: "config.clusterConfig.gardenerConfig.autoScalerMin",
		},
		"unknown provider": {
			modify: func(in *gqlschema.ProvisionRuntimeInput) { in.ClusterConfig.GardenerConfig.Provider = "no-such-cloud" },
			field:  "config.clusterConfig.gardenerConfig.provider",
		},
	} {
		t.Run(name, func(t *testing.T) {
			input := ProvisionInput("rt-invalid")
			tc.modify(&input)

			status, err := c.ProvisionRuntime(context.Background(), tenantA, input)

			assert.Nil(t, status)
			appErr := assertCode(t, apperr.CodeBadRequest, err)
			if appErr != nil {
				assert.Equal(t, tc.field, appErr.Field)
				assert.NotEmpty(t, appErr.Reason)
			}
		})
	}
}

func provisionRuntimeRequiresTenant(t *testing.T, c client.Client) {
	status, err := c.ProvisionRuntime(context.Background(), "", ProvisionInput("rt-no-tenant"))

	assert.Nil(t, status)
	appErr := assertCode(t, apperr.CodeBadRequest, err)
	if appErr != nil {
		assert.Equal(t, client.TenantHeader, appErr.Field)
	}
}

func deprovisionRuntimeRemovesTheRuntime(t *testing.T, c client.Client) {
	ctx := context.Background()
	runtimeID, _ := Provision(t, c, tenantA, ProvisionInput("rt-deprovision"))

	operationID, err := c.DeprovisionRuntime(ctx, tenantA, runtimeID)

	require.NoError(t, err)
	require.NotEmpty(t, operationID)
	status := WaitForOperation(t, c, tenantA, operationID)
	assert.Contains(t, []gqlschema.OperationType{gqlschema.OperationTypeDeprovision, gqlschema.OperationTypeDeprovisionNoInstall}, status.Operation)
	assert.Equal(t, runtimeID, deref(status.RuntimeID))

	_, err = c.RuntimeStatus(ctx, tenantA, runtimeID)
	assertCode(t, apperr.CodeNotFound, err)
}

// UpgradeShootInput is a valid shoot upgrade: a newer Kubernetes version and more nodes.
func UpgradeShootInput() gqlschema.UpgradeShootInput {
	return gqlschema.UpgradeShootInput{
		GardenerConfig: &gqlschema.GardenerUpgradeInput{
			KubernetesVersion: ptr("1.31"),
			AutoScalerMax:     ptr(6),
		},
		Administrators: []string{"admin@example.com", "second-admin@example.com"},
	}
}

func upgradeShootSucceeds(t *testing.T, c client.Client) {
	ctx := context.Background()
	runtimeID, _ := Provision(t, c, tenantA, ProvisionInput("rt-upgrade-shoot"))

	started, err := c.UpgradeShoot(ctx, tenantA, runtimeID, UpgradeShootInput())

	require.NoError(t, err)
	require.NotNil(t, started)
	assert.Equal(t, gqlschema.OperationTypeUpgradeShoot, started.Operation)
	assert.Equal(t, runtimeID, deref(started.RuntimeID))
	WaitForOperation(t, c, tenantA, deref(started.ID))

	status, err := c.RuntimeStatus(ctx, tenantA, runtimeID)
	require.NoError(t, err)
	require.NotNil(t, status.RuntimeConfiguration)
	require.NotNil(t, status.RuntimeConfiguration.ClusterConfig)
	assert.Equal(t, "1.31", deref(status.RuntimeConfiguration.ClusterConfig.KubernetesVersion))
	assert.Equal(t, 6, deref(status.RuntimeConfiguration.ClusterConfig.AutoScalerMax))
	assert.Equal(t, 3, deref(status.RuntimeConfiguration.ClusterConfig.AutoScalerMin), "fields not in the upgrade are kept")
}

func upgradeRuntimeSucceeds(t *testing.T, c client.Client) {
	ctx := context.Background()
	input := ProvisionInput("rt-upgrade")
	runtimeID, _ := Provision(t, c, tenantA, input)
	kymaConfig := *input.KymaConfig
	kymaConfig.Version = "2.21.0"

	started, err := c.UpgradeRuntime(ctx, tenantA, runtimeID, gqlschema.UpgradeRuntimeInput{KymaConfig: &kymaConfig})

	require.NoError(t, err)
	require.NotNil(t, started)
	assert.Equal(t, gqlschema.OperationTypeUpgrade, started.Operation)
	WaitForOperation(t, c, tenantA, deref(started.ID))

	status, err := c.RuntimeStatus(ctx, tenantA, runtimeID)
	require.NoError(t, err)
	require.NotNil(t, status.RuntimeConfiguration)
	require.NotNil(t, status.RuntimeConfiguration.KymaConfig)
	assert.Equal(t, "2.21.0", deref(status.RuntimeConfiguration.KymaConfig.Version))
}

func hibernateRuntimeSucceeds(t *testing.T, c client.Client) {
	runtimeID, _ := Provision(t, c, tenantA, ProvisionInput("rt-hibernate"))

	started, err := c.HibernateRuntime(context.Background(), tenantA, runtimeID)

	require.NoError(t, err)
	require.NotNil(t, started)
	assert.Equal(t, gqlschema.OperationTypeHibernate, started.Operation)
	assert.Equal(t, runtimeID, deref(started.RuntimeID))
	WaitForOperation(t, c, tenantA, deref(started.ID))
}

func reconnectRuntimeAgentReturnsAnOperation(t *testing.T, c client.Client) {
	runtimeID, _ := Provision(t, c, tenantA, ProvisionInput("rt-reconnect"))

	operationID, err := c.ReconnectRuntimeAgent(context.Background(), tenantA, runtimeID)

	require.NoError(t, err)
	assert.NotEmpty(t, operationID)
}

// resultsAreNotShared: what a caller does with a result or an input does not leak into the
// provisioner.
func resultsAreNotShared(t *testing.T, c client.Client) {
	ctx := context.Background()
	input := ProvisionInput("rt-shared")
	status, err := c.ProvisionRuntime(ctx, tenantA, input)
	require.NoError(t, err)
	runtimeID := deref(status.RuntimeID)
	input.ClusterConfig.GardenerConfig.Region = "changed-after-the-call"
	input.ClusterConfig.GardenerConfig.ProviderSpecificConfig.GCPConfig.Zones[0] = "changed-after-the-call"
	WaitForOperation(t, c, tenantA, deref(status.ID))

	first, err := c.RuntimeStatus(ctx, tenantA, runtimeID)
	require.NoError(t, err)
	require.NotNil(t, first.RuntimeConfiguration)
	require.NotNil(t, first.RuntimeConfiguration.ClusterConfig)
	assert.Equal(t, "europe-west3", deref(first.RuntimeConfiguration.ClusterConfig.Region))
	*first.RuntimeConfiguration.ClusterConfig.Region = "changed-in-a-result"
	first.LastOperationStatus.State = gqlschema.OperationStateFailed

	second, err := c.RuntimeStatus(ctx, tenantA, runtimeID)
	require.NoError(t, err)
	assert.Equal(t, "europe-west3", deref(second.RuntimeConfiguration.ClusterConfig.Region))
	require.IsType(t, &gqlschema.GCPProviderConfig{}, second.RuntimeConfiguration.ClusterConfig.ProviderSpecificConfig)
	assert.Equal(t, []string{"europe-west3-a", "europe-west3-b"}, second.RuntimeConfiguration.ClusterConfig.ProviderSpecificConfig.(*gqlschema.GCPProviderConfig).Zones)
	assert.Equal(t, gqlschema.OperationStateSucceeded, second.LastOperationStatus.State)
}

// Provision provisions a runtime for tenant and waits until it is provisioned; it returns the
// runtime's and the operation's IDs.
func Provision(t *testing.T, c client.Client, tenant string, input gqlschema.ProvisionRuntimeInput) (runtimeID, operationID string) {
	t.Helper()
	status, err := c.ProvisionRuntime(context.Background(), tenant, input)
	require.NoError(t, err, "provisioning runtime %s", input.RuntimeInput.Name)
	require.NotNil(t, status)
	runtimeID, operationID = deref(status.RuntimeID), deref(status.ID)
	require.NotEmpty(t, runtimeID, "runtime id")
	require.NotEmpty(t, operationID, "operation id")
	WaitForOperation(t, c, tenant, operationID)
	return runtimeID, operationID
}

// WaitForOperation polls the operation until it succeeded and returns its status; it fails the
// test when the operation fails or does not succeed within OperationTimeout.
func WaitForOperation(t *testing.T, c client.Client, tenant, operationID string) *gqlschema.OperationStatus {
	t.Helper()
	require.NotEmpty(t, operationID, "operation id")
	ctx, cancel := context.WithTimeout(context.Background(), OperationTimeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last *gqlschema.OperationStatus
	for {
		status, err := c.RuntimeOperationStatus(ctx, tenant, operationID)
		if err != nil && ctx.Err() == nil {
			require.NoError(t, err, "getting the status of operation %s", operationID)
		}
		if status != nil {
			last = status
			switch status.State {
			case gqlschema.OperationStateSucceeded:
				return status
			case gqlschema.OperationStateFailed:
				t.Fatalf("operation %s (%s) failed: %s %+v", operationID, status.Operation, deref(status.Message), deref(status.LastError))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("operation %s did not succeed within %s; last status: %+v", operationID, OperationTimeout, deref(last))
		case <-ticker.C:
		}
	}
}

// assertCode asserts that err carries code and returns its *apperr.Error (nil when it has none).
func assertCode(t *testing.T, code apperr.Code, err error) *apperr.Error {
	t.Helper()
	if !assert.Error(t, err) {
		return nil
	}
	assert.Equal(t, code, apperr.CodeOf(err), "error: %v", err)
	var appErr *apperr.Error
	if !assert.True(t, errors.As(err, &appErr), "%v is no *apperr.Error", err) {
		return nil
	}
	return appErr
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
