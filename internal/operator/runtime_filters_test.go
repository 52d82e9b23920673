package operator

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The filter table and the parameters GET /runtimes accepts agree: each filter reads an accepted
// parameter, and each accepted parameter is read by a filter, by paging or by the sort order.
func TestRuntimeFiltersCoverRuntimeParams(t *testing.T) {
	read := []string{"page", "page_size", "sort", "order"}
	for _, f := range runtimeFilters {
		assert.Contains(t, runtimeParams, f.param)
		read = append(read, f.param)
	}
	for _, p := range runtimeParams {
		assert.True(t, slices.Contains(read, p), "%s is accepted but read by nothing", p)
	}
}
