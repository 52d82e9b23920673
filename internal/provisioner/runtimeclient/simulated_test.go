package runtimeclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A simulated runtime takes the installation and agent connection durations its kubeconfig
// carries (the simulated backend's spec); durations set on Clusters win; a kubeconfig without
// them gets the defaults.
func TestSimulatedRuntimeDurationsFromItsKubeconfig(t *testing.T) {
	ctx := context.Background()
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return since.Add(d) } }
	open := func(c runtimeclient.Clusters, kc string) runtimeclient.Simulated {
		t.Helper()
		rt, err := c.ForKubeconfig(kc)
		require.NoError(t, err)
		s, ok := rt.(runtimeclient.Simulated)
		require.True(t, ok, "a simulated runtime")
		return s
	}

	s := open(runtimeclient.Clusters{}, runtimeclient.SimulatedKubeconfig("rt-1", 10*time.Second, time.Second))
	assert.Equal(t, 10*time.Second, s.InstallDuration)
	assert.Equal(t, time.Second, s.ConnectionDuration)
	s.Now = at(9 * time.Second)
	state, _, err := s.KymaState(ctx, runtimeclient.KymaSpec{}, since)
	require.NoError(t, err)
	assert.Equal(t, runtimeclient.KymaProcessing, state)
	s.Now = at(10 * time.Second)
	state, _, err = s.KymaState(ctx, runtimeclient.KymaSpec{}, since)
	require.NoError(t, err)
	assert.Equal(t, runtimeclient.KymaReady, state)
	conn, err := s.ConnectionState(ctx, since)
	require.NoError(t, err)
	assert.Equal(t, runtimeclient.ConnectionSynchronized, conn)

	s = open(runtimeclient.Clusters{}, runtimeclient.SimulatedKubeconfig("rt-1", 0, 0))
	assert.Equal(t, time.Duration(0), s.InstallDuration, "zero in the spec is zero")
	assert.Equal(t, time.Duration(0), s.ConnectionDuration)

	fast := runtimeclient.Clusters{Simulated: runtimeclient.Simulated{InstallDuration: time.Millisecond, ConnectionDuration: time.Millisecond}}
	s = open(fast, runtimeclient.SimulatedKubeconfig("rt-1", time.Hour, time.Hour))
	assert.Equal(t, time.Millisecond, s.InstallDuration, "set on Clusters wins")

	old := `apiVersion: v1
kind: Config
clusters:
- name: rt-1
  cluster:
    server: simulated://rt-1
contexts:
- name: rt-1
  context:
    cluster: rt-1
current-context: rt-1
`
	s = open(runtimeclient.Clusters{}, old)
	assert.Equal(t, runtimeclient.DefaultSimulatedInstallDuration, s.InstallDuration, "a kubeconfig written before")
	assert.Equal(t, runtimeclient.DefaultSimulatedConnectionDuration, s.ConnectionDuration)

	_, err = runtimeclient.Clusters{}.ForKubeconfig(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: simulated://rt-1?installationDuration=soon
contexts:
- name: c
  context:
    cluster: c
current-context: c
`)
	assert.ErrorContains(t, err, "invalid installationDuration")
}
