package sqlstore

import (
	"database/sql"
	"testing"

	"github.com/lib/pq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The literals are exactly lib/pq's (which the conformance suite runs against PostgreSQL).
func TestPGArraysMatchLibPQ(t *testing.T) {
	values := []string{"", "plain", `{"steps":{"a":{"done":true}}}`, `back\slash "quoted"`, "comma, {brace}", "NULL", "ünïcode\n"}
	for _, in := range [][]string{nil, {}, values, values[:1]} {
		want, err := pq.StringArray(in).Value()
		require.NoError(t, err)
		got, err := pgTextArray(in).Value()
		require.NoError(t, err)
		asBytes := make(pgByteTextArray, len(in))
		for i, v := range in {
			asBytes[i] = []byte(v)
		}
		gotBytes, err := asBytes.Value()
		require.NoError(t, err)
		assert.Equal(t, got, gotBytes)
		if in == nil {
			// lib/pq sends a nil slice as NULL; the batch never passes one (it makes its slices).
			assert.Equal(t, "{}", string(got.([]byte)))
			continue
		}
		assert.Equal(t, want, string(got.([]byte)))
	}

	nulls := []sql.NullString{{String: "2026-11-24T04:00:00Z", Valid: true}, {}, {String: `x"y`, Valid: true}, {String: "", Valid: true}}
	want, err := pq.GenericArray{A: nulls}.Value()
	require.NoError(t, err)
	got, err := pgNullTextArray(nulls).Value()
	require.NoError(t, err)
	assert.Equal(t, want, string(got.([]byte)))
}
