package directorschema_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director/directorschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The schema parses, the facts decode, and Validate refuses what the Director refuses: removed
// types, missing arguments, variables of the wrong type.
func TestSchemaAndFacts(t *testing.T) {
	s, err := directorschema.Load()
	require.NoError(t, err)
	f := directorschema.LoadFacts()
	assert.Equal(t, "^[a-zA-Z0-9_]*$", f.LabelKey.Pattern)
	assert.Equal(t, []string{"scenarios"}, f.RefusedLabels.Keys)

	ok := `mutation($in: RuntimeRegisterInput!) { registerRuntime(in: $in) { id } }`
	assert.NoError(t, directorschema.Validate(s, ok, map[string]any{"in": map[string]any{"name": "c-1", "labels": map[string]any{"a_b": "x"}}}))
	assert.ErrorContains(t, directorschema.Validate(s, ok, map[string]any{"in": map[string]any{"labels": map[string]any{}}}), "name")
	assert.ErrorContains(t, directorschema.Validate(s, `mutation($in: RuntimeInput!) { registerRuntime(in: $in) { id } }`, nil), `Unknown type "RuntimeInput"`)
	assert.ErrorContains(t, directorschema.Validate(s, `{ applicationsForRuntime(runtimeID: "r") { data { bundles { data { instanceAuth { id } } } } } }`, nil),
		`argument "id" of type "ID!" is required`)
	assert.Error(t, directorschema.Validate(s, `{ x }`, nil))
}
