// Command bench measures the step engine's durable throughput: it inserts N operations of S
// no-op steps, runs them with one engine on each driver, and prints one line per driver:
//
//	engine driver=postgres operations=10000 steps=100000 seconds=S ops_per_sec=X transitions_per_sec=Y
//
// Every step transition is a committed write (fsync on), as in production.
// PostgreSQL comes from KEB_TEST_DATABASE_URL (make bench-engine starts a throwaway server).
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/url"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	_ "github.com/lib/pq"
	"github.com/sirupsen/logrus"
)

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

func main() {
	drivers := flag.String("drivers", "postgres,sqlite", "comma-separated drivers to measure")
	operations := flag.Int("operations", 10000, "operations to run")
	steps := flag.Int("steps", 10, "no-op steps per operation (two stages)")
	workers := flag.Int("workers", 0, "engine workers (0: the engine's default)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cpu profile: %v\n", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	for _, d := range strings.Split(*drivers, ",") {
		if err := bench(log, d, *operations, *steps, *workers); err != nil {
			fmt.Fprintf(os.Stderr, "engine driver=%s: %v\n", d, err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
	}
}

func bench(log logrus.FieldLogger, drv string, operations, steps, workers int) error {
	ctx := context.Background()
	cfg, cleanup, err := config(drv)
	if err != nil {
		return err
	}
	defer cleanup()
	store, err := driver.Open(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("opening store: %w", err)
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
		return err
	}
	if err := insert(ctx, store, operations); err != nil {
		return err
	}
	eng, err := engine.New(store, engine.Config{Workers: workers}, log)
	if err != nil {
		return err
	}
	if err := eng.Register(def); err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- eng.Run(runCtx) }()
	for lastSteps.Load() < int64(operations) {
		time.Sleep(time.Millisecond)
	}
	// The last steps ran; wait for their final saves.
	for {
		n, err := finished(ctx, store)
		if err != nil {
			stop()
			return err
		}
		if n == operations {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	stop()
	if err := <-done; err != nil {
		return err
	}
	counts, err := store.Operations().CountOperations(ctx)
	if err != nil {
		return err
	}
	for _, c := range counts {
		if c.State != storage.StateSucceeded {
			return fmt.Errorf("%d operations ended %s", c.Count, c.State)
		}
	}
	fmt.Printf("engine driver=%s operations=%d steps=%d seconds=%.2f ops_per_sec=%.0f transitions_per_sec=%.0f\n",
		drv, operations, operations*steps, elapsed, float64(operations)/elapsed, float64(operations*steps)/elapsed)
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
func config(drv string) (driver.Config, func(), error) {
	key := strings.Repeat("k", 32)
	switch drv {
	case "sqlite":
		dir, err := os.MkdirTemp("", "keb-bench-")
		if err != nil {
			return driver.Config{}, nil, err
		}
		return driver.Config{Driver: "sqlite", Path: dir + "/bench.db", SecretKey: key}, func() { os.RemoveAll(dir) }, nil
	case "postgres":
		server := os.Getenv("KEB_TEST_DATABASE_URL")
		if server == "" {
			return driver.Config{}, nil, fmt.Errorf("KEB_TEST_DATABASE_URL is not set (run make bench-engine)")
		}
		admin, err := sql.Open("postgres", server)
		if err != nil {
			return driver.Config{}, nil, err
		}
		name := "keb_bench_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
		if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
			admin.Close()
			return driver.Config{}, nil, fmt.Errorf("creating bench database: %w", err)
		}
		u, err := url.Parse(server)
		if err != nil {
			admin.Close()
			return driver.Config{}, nil, err
		}
		u.Path = "/" + name
		return driver.Config{Driver: "postgres", URL: u.String(), SecretKey: key}, func() {
			_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			admin.Close()
		}, nil
	}
	return driver.Config{}, nil, fmt.Errorf("unknown driver %q (postgres or sqlite)", drv)
}
