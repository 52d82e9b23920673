// Command river compares KEB's step engine with River (riverqueue) on the same throwaway
// PostgreSQL server (KEB_TEST_DATABASE_URL; make bench-engine starts one). It is bench tooling
// in its own module, so River never enters the product's go.mod.
//
// Rounds alternate (a) the engine: -operations operations of -steps durable no-op steps, counted
// as transitions/s from the engine's start to the last operation's final save, and (b) River:
// operations×steps trivial jobs inserted with InsertMany (not timed, like the engine's
// operations), counted as jobs/s from the client's start to the last completion that River has
// committed (its job-completed events come after the completer's write). Each side gets a fresh
// database per round. The medians and their ratio are printed in one line:
//
//	engine-vs-river driver=postgres operations=5000 steps=10 rounds=5 workers=200 river_workers=200 engine_transitions_per_sec=X river_jobs_per_sec=Y ratio=X/Y
//
// River is tuned for throughput (see riverConfig); the engine runs with as many workers as River
// (-workers, its APP_ENGINE_WORKERS), its only throughput knob. With -sqlite the engine's SQLite
// figure is measured in the same rounds and printed as its own line (it has no reference).
//
// A round is 50,000 transitions / jobs by default (several seconds on the 2-core machine): with
// 20,000 a round lasted about a second and one invocation's rounds spread from 9.8k to 21.8k.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/tools/bench/benchkit"
	"github.com/kyma-project/kyma-environment-broker/tools/bench/engine/enginebench"
)

type options struct {
	operations, steps, rounds int
	engineWorkers             int
	riverWorkers              int
	fetchCooldown, fetchPoll  time.Duration
	sqlite                    bool
	riverOnly                 bool
	timeout                   time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.operations, "operations", 5000, "engine operations per round")
	flag.IntVar(&o.steps, "steps", 10, "no-op steps per operation; River works operations×steps jobs")
	flag.IntVar(&o.rounds, "rounds", 5, "alternating rounds (medians are printed)")
	flag.IntVar(&o.engineWorkers, "workers", 200, "engine workers (APP_ENGINE_WORKERS; 0: the engine's default of 64); as many as River's by default")
	flag.IntVar(&o.riverWorkers, "river-workers", 200, "River's MaxWorkers for the queue")
	flag.DurationVar(&o.fetchCooldown, "river-fetch-cooldown", time.Millisecond, "River's FetchCooldown (its minimum: fetch as often as workers free up)")
	flag.DurationVar(&o.fetchPoll, "river-fetch-poll", 5*time.Millisecond, "River's FetchPollInterval")
	flag.BoolVar(&o.sqlite, "sqlite", false, "also measure the engine on SQLite in each round")
	flag.BoolVar(&o.riverOnly, "river-only", false, "measure River alone and print its median as \"river driver=postgres ... jobs_per_sec=Y\": the machine's reference for make bench-e2e's scaled target")
	flag.DurationVar(&o.timeout, "round-timeout", 3*time.Minute, "a round that takes longer fails the run")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the first engine round (PostgreSQL) to this file")
	flag.Parse()
	if err := run(o, *cpuProfile); err != nil {
		fmt.Fprintf(os.Stderr, "engine-vs-river: %v\n", err)
		os.Exit(1)
	}
}

func run(o options, cpuProfile string) error {
	server := os.Getenv("KEB_TEST_DATABASE_URL")
	if server == "" {
		return errors.New("KEB_TEST_DATABASE_URL is not set (run make bench-engine)")
	}
	if o.riverOnly {
		return runRiverOnly(o, server)
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	var engineRates, riverRates, sqliteRates, engineCPU, riverCPU []float64
	for round := 0; round < o.rounds; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		if round == 0 && cpuProfile != "" {
			if err := startProfile(cpuProfile); err != nil {
				cancel()
				return err
			}
		}
		res, err := enginebench.Run(ctx, log, driver.Postgres, server, o.operations, o.steps, o.engineWorkers)
		if round == 0 && cpuProfile != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			cancel()
			return fmt.Errorf("round %d, engine: %w", round+1, err)
		}
		engineRates = append(engineRates, res.PerSec())
		engineCPU = append(engineCPU, res.CPU.Total()*1e6/float64(res.Transitions))
		jobs := o.operations * o.steps
		elapsed, used, err := riverRound(ctx, server, jobs, o)
		if err != nil {
			cancel()
			return fmt.Errorf("round %d, River: %w", round+1, err)
		}
		riverRates = append(riverRates, float64(jobs)/elapsed.Seconds())
		riverCPU = append(riverCPU, used.Total()*1e6/float64(jobs))
		fmt.Fprintf(os.Stderr, "round %d: engine %.0f transitions/s (%.2fs, %s), River %.0f jobs/s (%.2fs, %s), ratio %.2f\n",
			round+1, res.PerSec(), res.Elapsed.Seconds(), res.CPU.PerUnit(res.Transitions, "transition"),
			float64(jobs)/elapsed.Seconds(), elapsed.Seconds(), used.PerUnit(jobs, "job"), res.PerSec()*elapsed.Seconds()/float64(jobs))
		if o.sqlite {
			res, err := enginebench.Run(ctx, log, driver.SQLite, "", o.operations, o.steps, o.engineWorkers)
			if err != nil {
				cancel()
				return fmt.Errorf("round %d, engine on SQLite: %w", round+1, err)
			}
			sqliteRates = append(sqliteRates, res.PerSec())
		}
		cancel()
	}
	e, r := median(engineRates), median(riverRates)
	ec, rc := median(engineCPU), median(riverCPU)
	fmt.Printf("engine-vs-river driver=postgres operations=%d steps=%d rounds=%d workers=%d river_workers=%d engine_transitions_per_sec=%.0f river_jobs_per_sec=%.0f ratio=%.2f engine_cpu_us_per_transition=%.1f river_cpu_us_per_job=%.1f cpu_ratio=%.2f\n",
		o.operations, o.steps, o.rounds, o.engineWorkers, o.riverWorkers, e, r, e/r, ec, rc, rc/ec)
	if o.sqlite {
		fmt.Printf("engine driver=sqlite operations=%d steps=%d rounds=%d transitions_per_sec=%.0f\n",
			o.operations, o.steps, o.rounds, median(sqliteRates))
	}
	return nil
}

// runRiverOnly measures River's rounds alone: the reference the e2e bench scales its absolute
// target by (a machine's speed for a Go process writing PostgreSQL).
func runRiverOnly(o options, server string) error {
	jobs := o.operations * o.steps
	var rates []float64
	for round := 0; round < o.rounds; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		elapsed, _, err := riverRound(ctx, server, jobs, o)
		cancel()
		if err != nil {
			return fmt.Errorf("round %d, River: %w", round+1, err)
		}
		rates = append(rates, float64(jobs)/elapsed.Seconds())
		fmt.Fprintf(os.Stderr, "round %d: River %.0f jobs/s (%.2fs)\n", round+1, float64(jobs)/elapsed.Seconds(), elapsed.Seconds())
	}
	fmt.Printf("river driver=postgres jobs=%d rounds=%d river_workers=%d jobs_per_sec=%.0f\n", jobs, o.rounds, o.riverWorkers, median(rates))
	return nil
}

func startProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// noopArgs is River's trivial job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverConfig is River tuned for throughput of trivial jobs on one client:
//   - MaxWorkers well above the engine's 64: a trivial job holds its worker only until the
//     completer takes it, so more workers mean bigger fetches and bigger completion batches;
//   - FetchCooldown at River's minimum (1 ms; default 100 ms), so a producer fetches again as
//     soon as workers free up instead of at most ten times a second;
//   - FetchPollInterval short (default 1 s): jobs are all inserted before the start, so no
//     insert notification wakes the producer;
//   - the batch completer (River's default) writes completions in batches;
//   - no retention work or maintenance in the way: jobs complete once, nothing is rescued.
func riverConfig(o options) *river.Config {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	return &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.riverWorkers}},
		Workers:           workers,
		FetchCooldown:     o.fetchCooldown,
		FetchPollInterval: o.fetchPoll,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// riverRound inserts jobs into a fresh database, starts a client and returns the time from its
// start to the last committed completion, and the CPU time spent meanwhile.
func riverRound(ctx context.Context, server string, jobs int, o options) (time.Duration, benchkit.CPU, error) {
	var none benchkit.CPU
	dbURL, drop, err := enginebench.FreshPostgres(server)
	if err != nil {
		return 0, none, err
	}
	defer drop()
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return 0, none, err
	}
	defer db.Close()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return 0, none, fmt.Errorf("connecting: %w", err)
	}
	defer pool.Close()
	drv := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(drv, nil)
	if err != nil {
		return 0, none, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, none, fmt.Errorf("migrating River's schema: %w", err)
	}
	client, err := river.NewClient(drv, riverConfig(o))
	if err != nil {
		return 0, none, fmt.Errorf("creating the River client: %w", err)
	}
	const chunk = 5000
	for i := 0; i < jobs; i += chunk {
		params := make([]river.InsertManyParams, min(chunk, jobs-i))
		for j := range params {
			params[j] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return 0, none, fmt.Errorf("inserting jobs: %w", err)
		}
	}
	// Statistics for the planner, as the engine's operations get (enginebench.analyze); not timed.
	if _, err := db.ExecContext(ctx, "ANALYZE river_job"); err != nil {
		return 0, none, fmt.Errorf("analyzing river_job: %w", err)
	}
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: jobs + 1, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer unsubscribe()
	completed := 0
	cpu := benchkit.StartCPUWindow(ctx, db)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, none, fmt.Errorf("starting the River client: %w", err)
	}
	for completed < jobs {
		select {
		case <-ctx.Done():
			return 0, none, fmt.Errorf("%d of %d jobs completed: %w", completed, jobs, ctx.Err())
		case ev := <-events:
			if ev.Kind == river.EventKindJobCompleted {
				completed++
			}
		}
	}
	elapsed := time.Since(start)
	used := cpu.Stop(ctx)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return 0, none, fmt.Errorf("stopping the River client: %w", err)
	}
	return elapsed, used, nil
}
