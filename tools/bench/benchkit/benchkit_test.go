package benchkit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`# TYPE keb_engine_writes_total counter
keb_engine_writes_total{kind="claim",operation_type="provision"} 3
keb_engine_writes_total{kind="save",operation_type="provision"} 10
keb_engine_writes_total{kind="save",operation_type="deprovision"} 5
# TYPE keb_step_duration_seconds histogram
keb_step_duration_seconds_bucket{step="a",le="+Inf"} 7
keb_step_duration_seconds_sum{step="a"} 1.5
keb_step_duration_seconds_count{step="a"} 7
keb_step_duration_seconds_bucket{step="b",le="+Inf"} 2
keb_step_duration_seconds_sum{step="b"} 0.5
keb_step_duration_seconds_count{step="b"} 2
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 4.25
`))
	}))
	defer srv.Close()
	m, err := ReadMetrics(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 15.0, m.Sum("keb_engine_writes_total", map[string]string{"kind": "save"}))
	assert.Equal(t, 3.0, m.Sum("keb_engine_writes_total", map[string]string{"kind": "claim", "operation_type": "provision"}))
	assert.Equal(t, 18.0, m.Sum("keb_engine_writes_total", nil))
	assert.Equal(t, 9.0, m.Sum("keb_step_duration_seconds", nil), "a histogram counts its samples")
	assert.Equal(t, 4.25, m.Sum("process_cpu_seconds_total", nil))
	assert.Zero(t, m.Sum("missing", nil))
}

// TestMachineWindow: the machine's busy share over a window is a fraction, and its CPU per unit
// counts a busy loop of this process.
func TestMachineWindow(t *testing.T) {
	w := StartMachineWindow()
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
	}
	busy, perUnit, ok := w.Figures(1)
	require.True(t, ok)
	require.Greater(t, busy, 0.0)
	require.LessOrEqual(t, busy, 1.0)
	require.GreaterOrEqual(t, perUnit, 50.0, "the 100 ms busy loop")
}
