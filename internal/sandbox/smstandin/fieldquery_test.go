package smstandin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFieldQuery(t *testing.T) {
	allowed := []string{"name", "catalog_name", "service_offering_id"}
	for q, want := range map[string][]criterion{
		"":                           nil,
		"   ":                        nil,
		"name eq 'a'":                {{"name", "a"}},
		"  name   eq   'a b'  ":      {{"name", "a b"}},
		"name eq ''":                 {{"name", ""}},
		"name eq 'it''s'":            {{"name", "it's"}},
		"name eq 'x and y eq ''z'''": {{"name", "x and y eq 'z'"}},
		"catalog_name eq 'default' and service_offering_id eq '42'": {{"catalog_name", "default"}, {"service_offering_id", "42"}},
	} {
		got, err := parseFieldQuery(q, allowed...)
		require.NoError(t, err, q)
		assert.Equal(t, want, got, q)
	}

	for q, msg := range map[string]string{
		"id eq 'a'":                     `unsupported field "id" (supported: name, catalog_name, service_offering_id)`,
		"name ne 'a'":                   `unsupported operator "ne" (only eq is supported)`,
		"name in ('a','b')":             `unsupported operator "in"`,
		"name = 'a'":                    `expected an operator after "name"`,
		"name":                          `expected an operator after "name"`,
		"name eq a":                     "expected a value in single quotes",
		"name eq 'a":                    "unterminated quoted value",
		"name eq 'a' or name eq 'b'":    `expected "and" or the end of the query, found "or"`,
		"name eq 'a' and":               "expected a field name",
		"name eq 'a' and 'b'":           "expected a field name",
		"name eq 'a' name eq 'b'":       `found "name"`,
		"name eq 'a' and x eq 'b'":      `unsupported field "x"`,
		"'a' eq name":                   "expected a field name",
		"name eq 'a' and name eq 'b' (": `found ""`,
	} {
		_, err := parseFieldQuery(q, allowed...)
		require.Error(t, err, q)
		assert.ErrorContains(t, err, msg, q)
	}
}

func TestMatches(t *testing.T) {
	fields := map[string]string{"name": "a", "catalog_name": "b"}
	assert.True(t, matches(nil, fields))
	assert.True(t, matches([]criterion{{"name", "a"}, {"catalog_name", "b"}}, fields))
	assert.False(t, matches([]criterion{{"name", "a"}, {"catalog_name", "c"}}, fields))
}
