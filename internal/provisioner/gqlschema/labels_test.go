package gqlschema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
)

func TestLabels(t *testing.T) {
	t.Run("round trip", func(t *testing.T) {
		var l Labels
		require.NoError(t, l.UnmarshalGQL(map[string]any{"account": "a1", "zones": []any{"a", "b"}, "n": json.Number("3")}))

		var buf bytes.Buffer
		l.MarshalGQL(&buf)

		assert.JSONEq(t, `{"account":"a1","zones":["a","b"],"n":3}`, buf.String())
		assert.Equal(t, float64(3), l["n"], "numbers as encoding/json decodes them")
	})
	t.Run("null", func(t *testing.T) {
		l := Labels{"x": "y"}
		require.NoError(t, l.UnmarshalGQL(nil))
		assert.Nil(t, l)

		var buf bytes.Buffer
		l.MarshalGQL(&buf)
		assert.Equal(t, "null", buf.String())
	})
	t.Run("no object", func(t *testing.T) {
		var l Labels
		err := l.UnmarshalGQL("account=a1")
		assert.Equal(t, apperr.CodeBadRequest, apperr.CodeOf(err))
		assert.ErrorContains(t, err, "a string")
	})
}
