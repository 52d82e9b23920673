package sqlstore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// benchProgress is a provisioning's progress after its 20 steps (as BenchmarkDecodeProgress).
func benchProgress() storage.Progress {
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
	return p
}

// The progress's own paths (jsonappend encoding, gjson decoding of the compact v2 document)
// against encoding/json and go-json on the struct's own JSON: what each path costs per save and
// per claim (docs/contributor/performance.md).
func BenchmarkProgressPaths(b *testing.B) {
	p := benchProgress()
	std, err := json.Marshal(p)
	require.NoError(b, err)
	v2, err := encodeProgress(nil, p)
	require.NoError(b, err)
	b.Run("encode/jsonappend_v2", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = encodeProgress(buf[:0], p)
		}
	})
	b.Run("encode/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(p)
		}
	})
	b.Run("encode/go_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = gojson.Marshal(p)
		}
	})
	b.Run("decode/gjson_v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeProgress(v2); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out storage.Progress
			if err := json.Unmarshal(std, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/go_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out storage.Progress
			if err := gojson.Unmarshal(std, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(len(v2)), "v2_bytes")
	b.ReportMetric(float64(len(std)), "std_bytes")
}
