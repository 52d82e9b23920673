package overrides

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/resources"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestTheShippedDefaultsParse(t *testing.T) {
	d, err := ParseDefaults(resources.Overrides(), env(nil))
	require.NoError(t, err)
	var o Overrides
	var s storage.Secrets
	d.Apply(&o, &s, "trial")
	assert.Contains(t, o[Global], Entry{Key: "global.lowResourceProfile", Value: "true"})
	assert.Contains(t, o[Global], Entry{Key: "global.disableLegacyConnectivity", Value: "true"})
}

func TestPlanEntriesReplaceCommonOnes(t *testing.T) {
	d, err := ParseDefaults([]byte(`
components:
  eventing:
    - {key: a, value: common}
    - {key: password, valueFromEnv: EVENTING_PASSWORD}
plans:
  aws:
    eventing:
      - {key: a, value: aws}
`), env(map[string]string{"EVENTING_PASSWORD": "pw"}))
	require.NoError(t, err)
	var o Overrides
	var s storage.Secrets
	d.Apply(&o, &s, "aws")
	assert.Equal(t, []Entry{{Key: "a", Value: "aws"}, {Key: "password", Secret: true}}, o["eventing"])
	assert.Equal(t, "pw", s[SecretKey("eventing", "password")])

	var other Overrides
	d.Apply(&other, &s, "gcp")
	assert.Equal(t, "common", other["eventing"][0].Value)
}

func TestDefaultsErrorsNameThePlace(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"missing env":   {"components:\n  c:\n    - {key: k, valueFromEnv: NOPE}\n", "components.c[0].valueFromEnv: environment variable NOPE"},
		"empty key":     {"plans:\n  trial:\n    c:\n      - {value: v}\n", "plans.trial.c[0].key is empty"},
		"both":          {"components:\n  c:\n    - {key: k, value: v, valueFromEnv: X}\n", "not both"},
		"neither":       {"components:\n  c:\n    - {key: k}\n", "value or valueFromEnv is required"},
		"unknown field": {"component: {}\n", "component"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDefaults([]byte(tc.yaml), env(map[string]string{"X": "x"}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
