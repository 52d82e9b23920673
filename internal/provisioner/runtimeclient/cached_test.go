package runtimeclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type countingFactory struct {
	opened map[string]int
	err    error
}

func (f *countingFactory) ForKubeconfig(kc string) (runtimeclient.Runtime, error) {
	f.opened[kc]++
	if f.err != nil {
		return nil, f.err
	}
	return runtimeclient.Clusters{}.ForKubeconfig(kc)
}

func TestCachedOpensEachKubeconfigOnce(t *testing.T) {
	f := &countingFactory{opened: map[string]int{}}
	c := runtimeclient.Cached(f, 2)
	a, b, d := simulatedKubeconfig("rt-a"), simulatedKubeconfig("rt-b"), simulatedKubeconfig("rt-d")

	first, err := c.ForKubeconfig(a)
	require.NoError(t, err)
	again, err := c.ForKubeconfig(a)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, 1, f.opened[a], "opened once")
	_, err = c.ForKubeconfig(b)
	require.NoError(t, err)
	_, err = c.ForKubeconfig(d) // evicts a, the least recently used
	require.NoError(t, err)
	_, err = c.ForKubeconfig(a)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{a: 2, b: 1, d: 1}, f.opened, "bounded")

	f.err = errors.New("broken")
	bad := simulatedKubeconfig("rt-bad")
	_, err = c.ForKubeconfig(bad)
	require.Error(t, err)
	_, err = c.ForKubeconfig(bad)
	require.Error(t, err, "failures are not kept")
	assert.Equal(t, 2, f.opened[bad])
}

func simulatedKubeconfig(runtimeID string) string {
	return runtimeclient.SimulatedKubeconfig(runtimeID, time.Second, time.Second)
}
