package broker

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/broker/auth"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
)

// discardWriter is a ResponseWriter that keeps nothing but the status: the benchmark measures
// the handler chain, not a recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(code int)        { d.status = code }

// BenchmarkLastOperationHandler runs GET last_operation through the whole /v2 chain as
// cmd/broker wires it (request log at info, basic auth, guard, handler) on SQLite, without
// HTTP transport. Each iteration clones the request (the request log may add an ID to it).
func BenchmarkLastOperationHandler(b *testing.B) {
	ctx := context.Background()
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.InfoLevel)
	store, err := driver.Open(ctx, driver.Config{Driver: driver.SQLite, Path: filepath.Join(b.TempDir(), "keb.db"), MaxOpenConns: 50}, log)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	// Rows as large as real ones (a data document, encrypted secrets, step progress): the read
	// touches one table page per operation, so the page cache sees a realistic working set.
	const n = 1000
	data := []byte(`{"labels":{` + strings.Repeat(`"label.kyma-project.io/key":"value",`, 30) + `"last":"x"}}`)
	secrets := storage.Secrets{"kubeconfig": strings.Repeat("k", 2000)}
	progress := storage.Progress{FinishedStages: []string{"start", "create_runtime"}, Steps: map[string]storage.StepProgress{}}
	for _, s := range []string{"create_runtime", "check_runtime", "create_kyma", "check_kyma", "apply_modules"} {
		progress.Steps[s] = storage.StepProgress{FirstAttempt: time.Now(), Attempts: 3}
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("inst-%d", i)
		if _, err := store.Instances().InsertInstance(ctx, storage.Instance{InstanceID: id, RuntimeID: "rt-" + id, GlobalAccountID: "ga", ServiceID: ServiceID, PlanID: "p", Secrets: secrets}); err != nil {
			b.Fatal(err)
		}
		if _, err := store.Operations().InsertOperation(ctx, storage.Operation{ID: "op-" + id, InstanceID: id, Type: "provision", State: storage.StateInProgress,
			Description: "waiting for the Kyma resource to be ready", CreatedAt: time.Now(), Deadline: time.Now().Add(time.Hour),
			Progress: progress, Data: data, Secrets: secrets}); err != nil {
			b.Fatal(err)
		}
	}
	basic, err := auth.NewBasic("broker", "bench-password", auth.WithLogger(log))
	if err != nil {
		b.Fatal(err)
	}
	br := New(store, nil, nil, Config{OperationTimeout: time.Hour, DefaultRequestRegion: "cf-eu10"}, log)
	h := testRouter(br, basic, log, true)
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/v2/service_instances/inst-%d/last_operation?operation=op-inst-%d", i, i), nil)
		r.SetBasicAuth("broker", "bench-password")
		r.Header.Set("X-Broker-API-Version", "2.16")
		reqs[i] = r
	}
	rand.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		i := 0
		for pb.Next() {
			i++
			clear(w.h)
			w.status = http.StatusOK
			req := reqs[i%n].Clone(ctx)
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Errorf("status %d", w.status)
				return
			}
		}
	})
}

// processCPU is the CPU time the process has used: unlike ns/op it hardly moves with what
// else the machine runs.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
