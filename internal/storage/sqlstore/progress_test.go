package sqlstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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
				"alpha": {FirstAttempt: at, LastHealthy: at.Add(time.Second), Attempts: 7, Done: true, Skipped: true, RetryUntil: &until, RetryWithoutFail: true, LastError: odd, LastWait: odd, SlowWarned: true, Due: at.Add(2 * time.Minute), Late: 90 * time.Second, GivesUpAt: at.Add(3 * time.Minute)},
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

// inUTC is p with every time in UTC (version 2 reads times back in UTC).
func inUTC(p storage.Progress) storage.Progress {
	out := p
	if p.StageStartedAt != nil {
		out.StageStartedAt = map[string]time.Time{}
		for k, t := range p.StageStartedAt {
			out.StageStartedAt[k] = utcOrZero(t)
		}
	}
	if p.Steps != nil {
		out.Steps = map[string]storage.StepProgress{}
		for k, sp := range p.Steps {
			sp.FirstAttempt, sp.LastHealthy = utcOrZero(sp.FirstAttempt), utcOrZero(sp.LastHealthy)
			if sp.RetryUntil != nil {
				t := utcOrZero(*sp.RetryUntil)
				sp.RetryUntil = &t
			}
			out.Steps[k] = sp
		}
	}
	return out
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func TestProgressRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 2, 10, 0, 123456789, time.UTC)
	zone := time.FixedZone("x", 3600+30*60)
	until := at.Add(time.Minute).In(zone)
	early := at.Add(-time.Hour)
	odd := "quote\" back\\ <tag> & amp \n\r\t\b\f \x01 \x1f \u2028 \u2029 é 日本 end"
	full := storage.Progress{
		FinishedStages: []string{"create_runtime", odd},
		StageStartedAt: map[string]time.Time{"b": at, "a": at.In(zone), odd: {}},
		Steps: map[string]storage.StepProgress{
			"zeta":     {},
			"alpha":    {FirstAttempt: at, LastHealthy: at.Add(time.Second), Attempts: 7, Done: true, Skipped: true, RetryUntil: &until, RetryWithoutFail: true, LastError: odd, LastWait: odd, SlowWarned: true, Due: at.Add(2 * time.Minute), Late: 90 * time.Second, GivesUpAt: at.Add(3 * time.Minute)},
			"waiting":  {FirstAttempt: at, LastHealthy: at.Add(time.Hour), Attempts: 3},
			"window":   {FirstAttempt: early, Attempts: 2, RetryUntil: &until},
			"failing":  {FirstAttempt: at, Attempts: 1, LastError: "plain"},
			"late":     {FirstAttempt: at, Attempts: 4, Late: 3 * time.Second},
			"due":      {FirstAttempt: at, Attempts: 2, Due: at.Add(time.Second)},
			"gives up": {FirstAttempt: at, Attempts: 2, GivesUpAt: at.Add(time.Hour)},
			odd:        {FirstAttempt: at, Attempts: -1, LastWait: "retrying: x"},
		},
		ExecutedButNotCompleted: []string{"alpha", ""},
	}
	// A field added to the progress types must be added to the encoding too: the full case
	// sets every field, so a forgotten one shows as a difference below.
	requireEveryFieldSet(t, reflect.ValueOf(full))
	requireEveryFieldSet(t, reflect.ValueOf(full.Steps["alpha"]))
	cases := map[string]storage.Progress{
		"empty": {},
		"empty maps and slices": {FinishedStages: []string{}, StageStartedAt: map[string]time.Time{},
			Steps: map[string]storage.StepProgress{}, ExecutedButNotCompleted: []string{}},
		"full":       full,
		"only zeros": {Steps: map[string]storage.StepProgress{"skipped": {Done: true, Skipped: true}}},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := encodeProgress(nil, p)
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(string(b), progressV2Prefix), "%s", b)
			require.True(t, json.Valid(b), "%s", b)
			got, err := decodeProgress(b)
			require.NoError(t, err)
			want := inUTC(p)
			if len(want.FinishedStages) == 0 {
				want.FinishedStages = nil
			}
			if len(want.StageStartedAt) == 0 {
				want.StageStartedAt = nil
			}
			if len(want.Steps) == 0 {
				want.Steps = nil
			}
			if len(want.ExecutedButNotCompleted) == 0 {
				want.ExecutedButNotCompleted = nil
			}
			assert.Equal(t, want, got)
		})
	}
}

func TestProgressReadsVersion1(t *testing.T) {
	at := time.Date(2026, 11, 24, 2, 10, 0, 123456789, time.UTC)
	p := storage.Progress{FinishedStages: []string{"s"}, StageStartedAt: map[string]time.Time{"s": at},
		Steps:                   map[string]storage.StepProgress{"a": {FirstAttempt: at, Attempts: 2, Done: true, LastError: "e"}},
		ExecutedButNotCompleted: []string{"a"}}
	v1, err := json.Marshal(p)
	require.NoError(t, err)
	got, err := decodeProgress(v1)
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

func TestProgressOutOfRangeIsVersion1(t *testing.T) {
	for _, at := range []time.Time{time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)} {
		p := storage.Progress{Steps: map[string]storage.StepProgress{"s": {FirstAttempt: at, Attempts: 1}}}
		b, err := encodeProgress(nil, p)
		require.NoError(t, err)
		assert.False(t, strings.HasPrefix(string(b), progressV2Prefix), "%s", b)
		got, err := decodeProgress(b)
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	zero := time.Time{}
	p := storage.Progress{Steps: map[string]storage.StepProgress{"s": {Attempts: 1, RetryUntil: &zero}}}
	b, err := encodeProgress(nil, p)
	require.NoError(t, err)
	got, err := decodeProgress(b)
	require.NoError(t, err)
	assert.Equal(t, p, got, "a retry window ending at the zero time is not lost")
}

// TestProgressIsCompact: a provisioning's 20 steps, done, in well under half of version 1's bytes
// (and under PostgreSQL's 2 KB compression threshold).
func TestProgressIsCompact(t *testing.T) {
	at := time.Date(2026, 11, 24, 2, 10, 0, 123456789, time.UTC)
	p := storage.Progress{StageStartedAt: map[string]time.Time{}, Steps: map[string]storage.StepProgress{}}
	for i := 0; i < 20; i++ {
		p.Steps[fmt.Sprintf("Step_Number_%02d", i)] = storage.StepProgress{FirstAttempt: at.Add(time.Duration(i) * 1234567 * time.Microsecond), Attempts: 1, Done: true}
	}
	for i := 0; i < 4; i++ {
		p.StageStartedAt[fmt.Sprint("stage_", i)] = at.Add(time.Duration(i) * time.Second)
		p.FinishedStages = append(p.FinishedStages, fmt.Sprint("stage_", i))
	}
	v1, err := appendProgress(nil, p)
	require.NoError(t, err)
	v2, err := encodeProgress(nil, p)
	require.NoError(t, err)
	t.Logf("20 steps: version 1 %d bytes, version 2 %d bytes", len(v1), len(v2))
	assert.Less(t, len(v2), len(v1)/2)
	assert.Less(t, len(v2), 1024)
}

// A version 2 document whose fields have the wrong shape is refused, naming the step.
func TestProgressRefusesMalformedSteps(t *testing.T) {
	for name, steps := range map[string]string{
		"too few fields":      `{"s":[0,1]}`,
		"too many fields":     `{"s":[0,1,0,null,null,"","",null,0,null,1]}`,
		"late as a string":    `{"s":[0,1,0,null,null,"","",null,"1s"]}`,
		"time as a string":    `{"s":["0",1,0]}`,
		"attempts fractional": `{"s":[0,1.5,0]}`,
		"flags null":          `{"s":[0,1,null]}`,
		"error as a number":   `{"s":[0,1,0,null,null,5]}`,
		"time fractional":     `{"s":[0,1,0,2.5]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeProgress([]byte(`{"v":2,"t":1764000000000000000,"steps":` + steps + `}`))
			require.Error(t, err)
			assert.Contains(t, err.Error(), `step "s"`)
		})
	}
	_, err := decodeProgress([]byte(`{"v":2,"t":"x"}`))
	assert.Error(t, err)
}

// A provisioning's progress after its 20 steps, as a claim reads it.
func BenchmarkDecodeProgress(b *testing.B) {
	at := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	p := storage.Progress{StageStartedAt: map[string]time.Time{}, Steps: map[string]storage.StepProgress{}}
	for i := range 20 {
		stage := fmt.Sprint("stage_", i/5)
		p.StageStartedAt[stage] = at
		p.Steps[fmt.Sprint("Step_Number_", i)] = storage.StepProgress{FirstAttempt: at.Add(time.Duration(i) * time.Second),
			LastHealthy: at.Add(time.Duration(i) * time.Second), Attempts: 1 + i%3, Done: true, LastWait: "retrying: cluster creating"}
		if i%5 == 4 {
			p.FinishedStages = append(p.FinishedStages, stage)
		}
	}
	doc, err := encodeProgress(nil, p)
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := decodeProgress(doc); err != nil {
			b.Fatal(err)
		}
	}
}
