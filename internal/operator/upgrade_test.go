package operator_test

import (
	"net/http"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/operator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every given field of a target must match, "all" included: {"target":"all","globalAccount":"nope"}
// selected every runtime before.
func TestUpgradeTargetAllWithSelectors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	upgrade := func(target map[string]any) operator.UpgradeResponse {
		t.Helper()
		r := f.b.Do(http.MethodPost, "/upgrade/cluster", map[string]any{
			"targets":    map[string]any{"include": []any{target}},
			"kubernetes": map[string]any{"kubernetesVersion": "1.31.1"},
		})
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
		var out operator.UpgradeResponse
		r.JSON(t, &out)
		return out
	}
	none := upgrade(map[string]any{"target": "all", "globalAccount": "nope"})
	assert.Empty(t, none.Operations, "no runtime belongs to global account nope")
	assert.Empty(t, none.Skipped)

	one := upgrade(map[string]any{"target": "all", "globalAccount": "ga-1"})
	require.Len(t, one.Operations, 1, "only ga-1's provisioned runtime: %+v", one)
	assert.Equal(t, f.provisioned, one.Operations[0].InstanceID)
}
