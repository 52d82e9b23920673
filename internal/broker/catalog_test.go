package broker

import (
	"fmt"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A region's services are built once and shared; past the bound they are built per call, the
// same as the cached ones.
func TestCatalogServicesAreBuiltOncePerRegion(t *testing.T) {
	loaded, err := catalog.FromConfig(catalog.Config{})
	require.NoError(t, err)
	c := NewCatalog(loaded)

	eu10 := c.Services("cf-eu10")
	require.NotEmpty(t, eu10)
	assert.Same(t, &eu10[0], &c.Services("cf-eu10")[0], "the second call shares the first's result")
	assert.Equal(t, loaded.Services("cf-eu10"), eu10)
	assert.Equal(t, loaded.Services("cf-eu20"), c.Services("cf-eu20"))

	for i := 0; len(c.services.byRegion) < maxCachedCatalogs; i++ {
		c.Services(fmt.Sprintf("unknown-%d", i))
	}
	past := c.Services("cf-us10")
	assert.Len(t, c.services.byRegion, maxCachedCatalogs, "regions come from request paths: bounded")
	assert.Equal(t, loaded.Services("cf-us10"), past)
	assert.NotSame(t, &past[0], &c.Services("cf-us10")[0], "not kept past the bound")
}
