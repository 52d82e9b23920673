package hyperscaler

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolveIsStablePerTenantAndSpreadsTenants(t *testing.T) {
	p, err := ParsePool("aws: a1, a2 ,a3; azure:z1")
	require.NoError(t, err)
	assert.Equal(t, []Type{"aws", "azure"}, p.Types())

	counts := map[string]int{}
	for i := 0; i < 3000; i++ {
		tenant := fmt.Sprintf("ga-%d", i)
		s, err := p.resolve("aws", tenant)
		require.NoError(t, err)
		again, _ := p.resolve("aws", tenant)
		require.Equal(t, s, again)
		counts[s]++
	}
	for _, s := range []string{"a1", "a2", "a3"} {
		assert.InDelta(t, 1000, counts[s], 150, "secret %s", s)
	}
	z, err := p.resolve("azure", "anyone")
	require.NoError(t, err)
	assert.Equal(t, "z1", z)
}

func TestAddingASecretMovesOnlyTheTenantsItWins(t *testing.T) {
	before, _ := ParsePool("gcp:g1,g2")
	after, _ := ParsePool("gcp:g1,g2,g3")
	for i := 0; i < 500; i++ {
		tenant := fmt.Sprintf("t%d", i)
		b, _ := before.resolve("gcp", tenant)
		a, _ := after.resolve("gcp", tenant)
		if a != b {
			assert.Equal(t, "g3", a)
		}
	}
}

func TestResolveWithoutSecretsNamesTheHyperscaler(t *testing.T) {
	p, _ := ParsePool("aws:a1")
	_, err := p.Resolve(context.Background(), Request{Provider: "openstack", Tenant: "t"})
	require.ErrorIs(t, err, ErrNoSecret)
	assert.Contains(t, err.Error(), `"openstack"`)
}

func TestParsePoolRejectsMalformedEntries(t *testing.T) {
	for _, spec := range []string{"aws", ":a", "aws:,"} {
		_, err := ParsePool(spec)
		assert.Error(t, err, spec)
	}
}
