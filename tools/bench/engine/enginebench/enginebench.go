// Package enginebench measures the step engine's durable throughput: N operations of S no-op
// steps in two stages, run by one engine, every step transition a committed write (fsync on),
// as in production. The engine bench (tools/bench/engine) and the comparison with River
// (tools/bench/river) both run it.
package enginebench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/tools/bench/benchkit"
)

// Result is one measured run.
type Result struct {
	Driver      string
	Operations  int
	Transitions int
	// Elapsed runs from the engine's start to the last operation's final save.
	Elapsed time.Duration
	// CPU is what the same window cost this process and (PostgreSQL) the server.
	CPU benchkit.CPU
}

// PerSec is transitions per second.
func (r Result) PerSec() float64 { return float64(r.Transitions) / r.Elapsed.Seconds() }

func (r Result) String() string {
	return fmt.Sprintf("engine driver=%s operations=%d steps=%d seconds=%.2f ops_per_sec=%.0f transitions_per_sec=%.0f %s",
		r.Driver, r.Operations, r.Transitions, r.Elapsed.Seconds(), float64(r.Operations)/r.Elapsed.Seconds(), r.PerSec(),
		r.CPU.PerUnit(r.Transitions, "transition"))
}

// noop does nothing; the last step of an operation counts it, so the bench needs no polling
// of the database that would compete with the engine.
type noop struct {
	name string
	last *atomic.Int64
}

func (n noop) Name() string { return n.name }

func (n noop) Run(_ context.Context, op engine.Operation[struct{}], _ logrus.FieldLogger) (engine.Operation[struct{}], time.Duration, error) {
	if n.last != nil {
		n.last.Add(1)
	}
	return op, 0, nil
}

// Run opens a fresh database of the driver (PostgreSQL: a new database on the server at
// serverURL), inserts the operations (not timed) and runs them with one engine of the given
// workers (0: the engine's default).
func Run(ctx context.Context, log logrus.FieldLogger, drv, serverURL string, operations, steps, workers int) (Result, error) {
	cfg, cleanup, err := config(drv, serverURL)
	if err != nil {
		return Result{}, err
	}
	defer cleanup()
	store, err := driver.Open(ctx, cfg, log)
	if err != nil {
		return Result{}, fmt.Errorf("opening store: %w", err)
	}
	defer store.Close()

	var lastSteps atomic.Int64
	var first, second []engine.StepDef[struct{}]
	for i := 0; i < steps; i++ {
		n := noop{name: fmt.Sprintf("noop_%d", i)}
		if i == steps-1 {
			n.last = &lastSteps
		}
		sd := engine.StepDef[struct{}]{Step: n}
		if i < steps/2 {
			first = append(first, sd)
		} else {
			second = append(second, sd)
		}
	}
	def, err := engine.Staged("bench", time.Hour,
		engine.Stage[struct{}]{Name: "first", Steps: first}, engine.Stage[struct{}]{Name: "second", Steps: second})
	if err != nil {
		return Result{}, err
	}
	if err := insert(ctx, store, operations); err != nil {
		return Result{}, err
	}
	// PostgreSQL: one connection for the planner's statistics and the server's CPU time.
	var pg *sql.DB
	if cfg.Driver == driver.Postgres {
		if pg, err = sql.Open("postgres", cfg.URL); err != nil {
			return Result{}, err
		}
		defer pg.Close()
		if err := analyze(ctx, pg); err != nil {
			return Result{}, err
		}
	}
	eng, err := engine.New(store, engine.Config{Workers: workers}, log)
	if err != nil {
		return Result{}, err
	}
	if err := eng.Register(def); err != nil {
		return Result{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	cpu := benchkit.StartCPUWindow(ctx, pg)
	start := time.Now()
	go func() { done <- eng.Run(runCtx) }()
	for lastSteps.Load() < int64(operations) {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		time.Sleep(time.Millisecond)
	}
	// The last steps ran; wait for their final saves.
	for {
		n, err := finished(ctx, store)
		if err != nil {
			return Result{}, err
		}
		if n == operations {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	used := cpu.Stop(ctx)
	stop()
	if err := <-done; err != nil {
		return Result{}, err
	}
	counts, err := store.Operations().CountOperations(ctx)
	if err != nil {
		return Result{}, err
	}
	for _, c := range counts {
		if c.State != storage.StateSucceeded {
			return Result{}, fmt.Errorf("%d operations ended %s", c.Count, c.State)
		}
	}
	return Result{Driver: drv, Operations: operations, Transitions: operations * steps, Elapsed: elapsed, CPU: used}, nil
}

// analyze gives PostgreSQL's planner statistics of the operations just inserted (not timed), as
// autovacuum gives a table in service and as pgbench prepares its tables. Without them the
// planner takes the (state, type) index for every claim of a fresh table, reads and sorts all
// 5,000 waiting operations per claim (~10 ms each; auto_explain), and the bench measures that
// rather than the engine: PostgreSQL CPU per transition ~60 µs against ~45 µs with statistics.
func analyze(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, "ANALYZE operations"); err != nil {
		return fmt.Errorf("analyzing operations: %w", err)
	}
	return nil
}

func finished(ctx context.Context, store storage.Store) (int, error) {
	counts, err := store.Operations().CountOperations(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range counts {
		if !c.State.Active() {
			n += c.Count
		}
	}
	return n, nil
}

// insert creates the operations up front (not timed) with a few concurrent writers.
func insert(ctx context.Context, store storage.Store, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				op, err := engine.NewOperation("bench", fmt.Sprintf("instance-%d", i), struct{}{}, time.Hour, time.Now())
				if err == nil {
					_, err = store.Operations().InsertOperation(ctx, op)
				}
				if err != nil {
					errs <- fmt.Errorf("inserting operation %d: %w", i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// config gives a fresh database for the driver and a function that removes it.
func config(drv, serverURL string) (driver.Config, func(), error) {
	key := strings.Repeat("k", 32)
	switch drv {
	case driver.SQLite:
		dir, err := os.MkdirTemp("", "keb-bench-")
		if err != nil {
			return driver.Config{}, nil, err
		}
		return driver.Config{Driver: driver.SQLite, Path: dir + "/bench.db", SecretKey: key}, func() { os.RemoveAll(dir) }, nil
	case driver.Postgres:
		u, drop, err := FreshPostgres(serverURL)
		if err != nil {
			return driver.Config{}, nil, err
		}
		return driver.Config{Driver: driver.Postgres, URL: u, SecretKey: key}, drop, nil
	}
	return driver.Config{}, nil, fmt.Errorf("unknown driver %q (postgres or sqlite)", drv)
}

// FreshPostgres creates an empty database on the server at serverURL and returns its URL and a
// function that drops it.
func FreshPostgres(serverURL string) (string, func(), error) {
	if serverURL == "" {
		return "", nil, fmt.Errorf("no PostgreSQL server: KEB_TEST_DATABASE_URL is not set (run make bench-engine)")
	}
	return benchkit.FreshDatabase(context.Background(), serverURL, "keb_bench")
}
