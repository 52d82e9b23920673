package gql

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A query that validated is kept and reused with other variables; one that did not is answered
// with its errors every time, not kept.
func TestPrepareKeepsValidatedQueries(t *testing.T) {
	s := MustLoad("test", `type Query { echo(v: String!): String }`)
	q := `query Echo($v: String!) { echo(v: $v) }`
	for _, v := range []string{"a", "b"} {
		op, errs := s.Prepare(Request{Query: q, Variables: map[string]any{"v": v}})
		require.Nil(t, errs)
		got := op.Execute(func(_ string, args map[string]any) (any, error) { return args["v"], nil })
		assert.Equal(t, map[string]any{"echo": v}, got.Data)
	}
	assert.Equal(t, 1, s.docs.Len(), "queries kept")
	for range 2 {
		_, errs := s.Prepare(Request{Query: `{ nope }`})
		require.Len(t, errs, 1)
		assert.Equal(t, CodeValidationFailed, errs[0].Extensions["code"])
	}
	assert.Equal(t, 1, s.docs.Len(), "queries kept")
}
