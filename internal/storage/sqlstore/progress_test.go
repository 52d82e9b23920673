package sqlstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func TestAppendProgressIsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 24, 2, 10, 0, 123456789, time.UTC)
	zone := time.FixedZone("x", 3600+30*60)
	until := at.Add(time.Minute).In(zone)
	odd := "quote\" back\\ <tag> & amp \n\r\t\b\f \x01 \x1f \u2028 \u2029 é 日本 \xff\xfe end"
	cases := map[string]storage.Progress{
		"empty": {},
		"empty maps and slices": {FinishedStages: []string{}, StageStartedAt: map[string]time.Time{},
			Steps: map[string]storage.StepProgress{}, ExecutedButNotCompleted: []string{}},
		"full": {
			FinishedStages: []string{"create_runtime", odd},
			StageStartedAt: map[string]time.Time{"b": at, "a": at.In(zone), odd: {}},
			Steps: map[string]storage.StepProgress{
				"zeta":  {},
				"alpha": {FirstAttempt: at, LastHealthy: at.Add(time.Second), Attempts: 7, Done: true, Skipped: true, RetryUntil: &until, RetryWithoutFail: true, LastError: odd, LastWait: odd},
				odd:     {FirstAttempt: at, Attempts: -1, LastError: "plain"},
			},
			ExecutedButNotCompleted: []string{"alpha", ""},
		},
	}
	// A field added to the progress types must be added to appendProgress too: the full case
	// sets every field, so a forgotten one shows as a difference below.
	full := cases["full"]
	requireEveryFieldSet(t, reflect.ValueOf(full))
	requireEveryFieldSet(t, reflect.ValueOf(full.Steps["alpha"]))
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(p)
			require.NoError(t, err)
			got, err := appendProgress(nil, p)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
			var back storage.Progress
			require.NoError(t, json.Unmarshal(got, &back))
		})
	}
}

func requireEveryFieldSet(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		require.False(t, v.Field(i).IsZero(), "the test's full case must set %s.%s", v.Type().Name(), v.Type().Field(i).Name)
	}
}

func TestAppendProgressRefusesWhatEncodingJSONRefuses(t *testing.T) {
	p := storage.Progress{Steps: map[string]storage.StepProgress{"s": {FirstAttempt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}
	_, want := json.Marshal(p)
	require.Error(t, want)
	_, err := appendProgress(nil, p)
	assert.Error(t, err)
}
