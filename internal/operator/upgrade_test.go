package operator_test

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dryRun creates a dry-run orchestration (stored, never run: the fixture has no engine) and
// returns the instances it selected.
func dryRun(t *testing.T, f fixture, targets map[string]any) []string {
	t.Helper()
	r := f.b.Do(http.MethodPost, "/upgrade/cluster", map[string]any{
		"targets": targets, "kubernetes": map[string]any{"kubernetesVersion": "1.31.1"}, "dryRun": true,
	})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	var created dto.UpgradeResponse
	r.JSON(t, &created)
	assert.Equal(t, "/orchestrations/"+created.OrchestrationID, r.Header.Get("Location"))
	r = f.b.Get("/orchestrations/" + created.OrchestrationID + "/operations")
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	var ops dto.OperationResponseList
	r.JSON(t, &ops)
	var out []string
	for _, op := range ops.Data {
		assert.True(t, op.DryRun)
		assert.Equal(t, dto.Succeeded, op.State)
		out = append(out, op.InstanceID)
	}
	r = f.b.Get("/orchestrations/" + created.OrchestrationID)
	var st dto.StatusResponse
	r.JSON(t, &st)
	assert.Equal(t, dto.Succeeded, st.State, "a dry run ends at once")
	assert.Equal(t, len(out), st.OperationStats[dto.Succeeded])
	return out
}

// Every given field of a target must match, "all" included: {"target":"all","globalAccount":"nope"}
// selected every runtime before.
func TestUpgradeTargetAllWithSelectors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	assert.Empty(t, dryRun(t, f, map[string]any{"include": []any{map[string]any{"target": "all", "globalAccount": "nope"}}}))
	assert.Equal(t, []string{f.provisioned}, dryRun(t, f, map[string]any{"include": []any{map[string]any{"target": "all", "globalAccount": "ga-1"}}}),
		"only ga-1's runtime that has a runtime ID")
	assert.Equal(t, []string{f.provisioned}, dryRun(t, f, map[string]any{"include": []any{map[string]any{"planName": "aws", "region": "eu-central-1"}}}))
	assert.Empty(t, dryRun(t, f, map[string]any{"include": []any{map[string]any{"target": "all"}}, "exclude": []any{map[string]any{"runtimeID": f.runtimeID}}}))
}

// A hostile client gets a 400 naming the field, a 404 for unknown IDs and a 401 without
// credentials; nothing is stored.
func TestOrchestrationRequestsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	all := map[string]any{"include": []any{map[string]any{"target": "all"}}}
	for name, c := range map[string]struct {
		path  string
		body  any
		field string
	}{
		"no version":       {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{}}, "kyma.version"},
		"cluster in kyma":  {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2.1"}, "kubernetes": map[string]any{"kubernetesVersion": "1"}}, "kubernetes"},
		"no k8s version":   {"/upgrade/cluster", map[string]any{"targets": all, "kubernetes": map[string]any{}}, "kubernetes.kubernetesVersion"},
		"no targets":       {"/upgrade/kyma", map[string]any{"kyma": map[string]any{"version": "2.1"}}, "targets.include"},
		"empty target":     {"/upgrade/kyma", map[string]any{"targets": map[string]any{"include": []any{map[string]any{}}}, "kyma": map[string]any{"version": "2.1"}}, "targets.include[0]"},
		"bad target":       {"/upgrade/kyma", map[string]any{"targets": map[string]any{"include": []any{map[string]any{"target": "some"}}}, "kyma": map[string]any{"version": "2.1"}}, "targets.include[0].target"},
		"unknown plan":     {"/upgrade/kyma", map[string]any{"targets": map[string]any{"include": []any{map[string]any{"planName": "nope"}}}, "kyma": map[string]any{"version": "2.1"}}, "targets.include[0].planName"},
		"zero workers":     {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2.1"}, "strategy": map[string]any{"parallel": map[string]any{"workers": -1}}}, "strategy.parallel.workers"},
		"too many workers": {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2.1"}, "strategy": map[string]any{"parallel": map[string]any{"workers": 100000}}}, "strategy.parallel.workers"},
		"bad schedule":     {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2.1"}, "strategy": map[string]any{"schedule": "tomorrow"}}, "strategy.schedule"},
		"bad strategy":     {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2.1"}, "strategy": map[string]any{"type": "serial"}}, "strategy.type"},
		"wrong type":       {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": 2}}, "kyma.version"},
		"workers a string": {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2"}, "strategy": map[string]any{"parallel": map[string]any{"workers": "4"}}}, "strategy.parallel.workers"},
		"unknown field":    {"/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2"}, "extra": 1}, "extra"},
		"many targets":     {"/upgrade/kyma", map[string]any{"targets": map[string]any{"include": manyTargets(101)}, "kyma": map[string]any{"version": "2"}}, "targets.include: at most 100"},
		"long selector":    {"/upgrade/kyma", map[string]any{"targets": map[string]any{"include": []any{map[string]any{"region": strings.Repeat("x", 300)}}}, "kyma": map[string]any{"version": "2"}}, "targets.include[0]"},
	} {
		r := f.b.Do(http.MethodPost, c.path, c.body)
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r)
		assert.Contains(t, r.Description(), c.field, name)
	}
	r := f.b.Do(http.MethodPost, "/upgrade/kyma", strings.Repeat("x", 2<<20))
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "%s", r)

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/orchestrations/nope"}, {http.MethodGet, "/orchestrations/nope/operations"},
		{http.MethodGet, "/orchestrations/nope/operations/x"}, {http.MethodPut, "/orchestrations/nope/cancel"}, {http.MethodPut, "/orchestrations/nope/retry"},
	} {
		r := f.b.Do(c.method, c.path, nil)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", c.method, c.path, r)
	}
	for _, q := range []string{"?page=0", "?page_size=5000", "?state=done", "?page=x"} {
		r := f.b.Get("/orchestrations" + q)
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", q, r)
	}
	r = f.b.Get("/orchestrations", bt.WithoutAuth())
	assert.Equal(t, http.StatusUnauthorized, r.Status)
	r = f.b.Do(http.MethodPost, "/upgrade/kyma", map[string]any{"targets": all, "kyma": map[string]any{"version": "2"}}, bt.WithBasicAuth("broker", "wrong"))
	assert.Equal(t, http.StatusUnauthorized, r.Status)

	r = f.b.Get("/orchestrations")
	require.Equal(t, http.StatusOK, r.Status)
	var list dto.StatusResponseList
	r.JSON(t, &list)
	assert.Zero(t, list.TotalCount, "nothing refused was stored")
}

func manyTargets(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"region": "r"}
	}
	return out
}
