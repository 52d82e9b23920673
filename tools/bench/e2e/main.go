// Command e2e measures provisionings completed per second end to end: it builds the real broker
// (./cmd/broker), runs it with its embedded sandbox (no latency) and the fastest simulated
// clusters (every duration 0), fires -n provisionings over OSB with -c in flight, and waits until
// every one has succeeded (polling last_operation). Per database it prints one line:
//
//	e2e driver=postgres n=4000 c=1000 provisionings_per_s=X target=250 ratio=X/250
//	    engine_writes_per_provisioning=W (claims=.. saves=..) events_per_provisioning=E
//	    rows_written_per_provisioning=R (PostgreSQL: per table) postgres_cores=.. postgres_cpu_ms_per_provisioning=..
//	    statements_per_provisioning=.. exec_ms_per_provisioning=.. wal_kb_per_provisioning=..
//
// Engine writes and events come from the broker's /metrics (keb_engine_writes_total,
// keb_engine_events_total: the broker's and the embedded provisioner's operations); on
// PostgreSQL, pg_stat_user_tables gives every row the run inserted, updated or deleted, per
// table; the server's CPU time (from /proc: the benches' server runs here) and, when the server
// preloads pg_stat_statements (scripts/postgres.sh does), the statements the broker's database
// ran, their execution time and WAL. PostgreSQL comes from KEB_TEST_DATABASE_URL (make bench-e2e starts a throwaway server;
// each run gets a fresh database); without it only SQLite is measured. -cpuprofile P writes the
// broker's CPU profile of each run to P.<driver>. Every run stops by itself within -timeout.
// -src builds the broker from another checkout (before/after; a broker without the engine's
// write metrics prints 0 for them, the PostgreSQL row counts still hold).
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	_ "github.com/lib/pq"

	"golang.org/x/sync/errgroup"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/tools/bench/benchkit"
)

const (
	username = "broker"
	password = "bench-password"
	target   = 250.0
	// fastest is the simulated backend with every duration 0.
	fastest = `{"simulated": {"type": "simulated", "spec": {"domainDelay": 0, "creationDuration": 0, "updateDuration": 0,
		"hibernationDuration": 0, "deletionDuration": 0, "installationDuration": 0, "agentConnectionDuration": 0}}}`
)

type options struct {
	n, c       int
	rounds     int
	rate       float64
	drivers    []string
	poll       time.Duration
	stepPoll   string
	timeout    time.Duration
	cpuProfile string
	logLevel   string
	src        string
	set        string
	env        []string
	keep       bool
	reference  bool
}

func main() {
	var o options
	drivers := flag.String("drivers", "sqlite,postgres", "comma-separated databases (postgres needs KEB_TEST_DATABASE_URL)")
	env := flag.String("env", "", "extra APP_* settings for the broker, comma-separated NAME=VALUE")
	flag.IntVar(&o.n, "n", 4000, "provisionings")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds, the databases alternating within each; with more than one, a summary line per database gives the median and range")
	// A client sees its provisioning done at a poll, so a run's rate is at most c over whole poll
	// intervals: 500 clients polling every second could never show 250/s (done within 2 s is
	// 500/2.06 s = 243/s), and a run's rate jumped between ~165 and ~205/s as the latency fell
	// either side of 2 s. With 1,000 the machine, not the polls, is the limit (busy 0.95).
	flag.IntVar(&o.c, "c", 1000, "provisionings in flight (each one's client polls last_operation)")
	flag.Float64Var(&o.rate, "rate", 0, "start provisionings at this rate per second (at most -c in flight) instead of as fast as -c allows: below saturation, the CPU figures per provisioning are steadier (A/B of small changes)")
	flag.DurationVar(&o.poll, "poll", time.Second, "how often a client polls last_operation")
	flag.StringVar(&o.stepPoll, "step-poll", "", "APP_BROKER_POLL_INTERVAL of the broker (its default when empty)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound of one run")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write the broker's CPU profile of each run to this path plus .<driver>")
	flag.StringVar(&o.logLevel, "log-level", "info", "APP_LOG_LEVEL of the broker (info is the production default)")
	flag.StringVar(&o.set, "set", fastest, "APP_PROVISIONER_SET_JSON (default: the simulated backend with every duration 0)")
	flag.StringVar(&o.src, "src", "", "build the broker from this checkout instead (e.g. an export of the previous commit, for before/after)")
	flag.BoolVar(&o.keep, "keep", false, "keep PostgreSQL's database of the run (its name is printed) to look at its rows")
	flag.BoolVar(&o.reference, "reference", false, "measure River's rate before and after the runs (PostgreSQL) and print the target scaled to this machine beside it")
	flag.Parse()
	o.drivers = strings.Split(*drivers, ",")
	if *env != "" {
		o.env = strings.Split(*env, ",")
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "e2e bench: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	repo, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	root := repo
	if o.src != "" {
		root = o.src
	}
	dir, err := os.MkdirTemp("", "keb-bench-e2e-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := benchkit.BuildBroker(context.Background(), root, dir)
	if err != nil {
		return err
	}
	var ref *reference
	switch {
	case o.reference && os.Getenv("KEB_TEST_DATABASE_URL") == "":
		fmt.Println("e2e reference skipped: River needs KEB_TEST_DATABASE_URL (make bench-e2e starts a server)")
	case o.reference:
		ref = &reference{}
		// River from this checkout, also when -src builds the broker from another.
		if ref.before, err = measureRiver(repo); err != nil {
			return err
		}
	}
	figures := map[string][]figure{}
	for round := 1; round <= max(o.rounds, 1); round++ {
		for _, d := range o.drivers {
			f, err := runDriver(o, bin, dir, d, round)
			if err != nil {
				return fmt.Errorf("%s: %w", d, err)
			}
			if f != nil {
				figures[d] = append(figures[d], *f)
			}
		}
	}
	if o.rounds > 1 {
		for _, d := range o.drivers {
			if fs := figures[d]; len(fs) > 0 {
				fmt.Println(summary(d, o, fs))
			}
		}
	}
	if ref != nil {
		if ref.after, err = measureRiver(repo); err != nil {
			return err
		}
		fmt.Println(ref.line())
		if fs := figures["postgres"]; len(fs) > 0 {
			fmt.Println(ref.scaled(fs))
		}
	}
	return nil
}

// figure is what a summary keeps of one run; machineOK: /proc/stat was read.
type figure struct {
	rate, machineMs float64
	machineOK       bool
}

// summary is a database's line over its rounds: the median, lowest and highest throughput and
// machine CPU per provisioning. The machine's speed for this load changes from run to run
// (runs of one build land 10-15% apart), so one run says little about a small change.
func summary(driver string, o options, fs []figure) string {
	rates, ms := sortedRates(fs), make([]float64, 0, len(fs))
	for _, f := range fs {
		if f.machineOK {
			ms = append(ms, f.machineMs)
		}
	}
	slices.Sort(ms)
	line := fmt.Sprintf("e2e summary driver=%s rounds=%d n=%d c=%d provisionings_per_s=%.1f (min=%.1f max=%.1f) target=%.0f ratio=%.2f",
		driver, len(fs), o.n, o.c, median(rates), rates[0], rates[len(rates)-1], target, median(rates)/target)
	if len(ms) == len(fs) {
		line += fmt.Sprintf(" machine_cpu_ms_per_provisioning=%.1f (min=%.1f max=%.1f)", median(ms), ms[0], ms[len(ms)-1])
	}
	return line
}

// sortedRates is the runs' rates, lowest first.
func sortedRates(fs []figure) []float64 {
	rates := make([]float64, len(fs))
	for i, f := range fs {
		rates[i] = f.rate
	}
	slices.Sort(rates)
	return rates
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// runDriver runs one round on one database: nil figures when it is skipped.
func runDriver(o options, bin, dir, d string, round int) (*figure, error) {
	switch d {
	case "sqlite":
		// Each round starts from an empty database, as PostgreSQL's do.
		path := filepath.Join(dir, fmt.Sprintf("keb-%d.db", round))
		return runOne(o, bin, dir, "sqlite", []string{"APP_DATABASE_DRIVER=sqlite", "APP_DATABASE_PATH=" + path}, nil)
	case "postgres":
		base := os.Getenv("KEB_TEST_DATABASE_URL")
		if base == "" {
			if round == 1 {
				fmt.Println("e2e driver=postgres skipped: KEB_TEST_DATABASE_URL is not set (make bench-e2e starts a server)")
			}
			return nil, nil
		}
		dbURL, drop, err := benchkit.FreshDatabase(context.Background(), base, "keb_e2e")
		if err != nil {
			return nil, err
		}
		db, err := sql.Open("postgres", dbURL)
		var f *figure
		if err == nil {
			f, err = runOne(o, bin, dir, "postgres", []string{"APP_DATABASE_DRIVER=postgres", "APP_DATABASE_URL=" + dbURL,
				"APP_DATABASE_SECRET_KEY=" + strings.Repeat("k", 32)}, db)
			db.Close()
		}
		if o.keep {
			fmt.Println("e2e kept database:", dbURL)
		} else {
			drop()
		}
		return f, err
	default:
		return nil, fmt.Errorf("unknown driver %q", d)
	}
}

// runOne starts the broker on one database, runs the load and prints its line. db, when set, is
// the broker's PostgreSQL database, for the row counts.
func runOne(o options, bin, dir, driver string, dbEnv []string, db *sql.DB) (*figure, error) {
	addr, err := benchkit.FreeAddress()
	if err != nil {
		return nil, err
	}
	sandboxAddr, err := benchkit.FreeAddress()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	brokerURL := "http://" + addr
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"APP_PORT=" + port, "APP_SANDBOX_ADDRESS=" + sandboxAddr, "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
		"APP_BROKER_USERNAME=" + username, "APP_BROKER_PASSWORD=" + password, "APP_PROVISIONER_SET_JSON=" + o.set,
		"APP_LOG_LEVEL=" + o.logLevel, "APP_LOG_FORMAT=json"}
	if o.stepPoll != "" {
		env = append(env, "APP_BROKER_POLL_INTERVAL="+o.stepPoll)
	}
	if o.cpuProfile != "" {
		env = append(env, "APP_CPU_PROFILE="+o.cpuProfile+"."+driver)
	}
	env = append(append(env, dbEnv...), o.env...)
	b, err := benchkit.StartBroker(context.Background(), bin, dir, "broker-"+driver+".log", brokerURL, env)
	if err != nil {
		return nil, err
	}
	defer b.Stop() // SIGTERM: the broker shuts down and writes its CPU profile
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.c, MaxConnsPerHost: o.c}, Timeout: 30 * time.Second}
	before, err := benchkit.ReadMetrics(context.Background(), client, brokerURL)
	if err != nil {
		return nil, err
	}
	var pg *benchkit.PostgresSide
	if db != nil {
		pg = benchkit.StartPostgresSide(context.Background(), db)
	}
	machine := benchkit.StartMachineWindow()
	res, err := load(client, brokerURL, o)
	machineShare, machineMs, machineOK := machine.Figures(float64(o.n))
	var pgFigures benchkit.PostgresFigures
	if pg != nil {
		pgFigures = pg.Stop(context.Background())
	}
	if err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, b.Tail())
	}
	after, err := benchkit.ReadMetrics(context.Background(), client, brokerURL)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for key, sum := range map[string]func(benchkit.Metrics) float64{
		"claim": func(x benchkit.Metrics) float64 {
			return x.Sum("keb_engine_writes_total", map[string]string{"kind": "claim"})
		},
		"save": func(x benchkit.Metrics) float64 {
			return x.Sum("keb_engine_writes_total", map[string]string{"kind": "save"})
		},
		"events": func(x benchkit.Metrics) float64 { return x.Sum("keb_engine_events_total", nil) },
		"calls":  func(x benchkit.Metrics) float64 { return x.Sum("keb_external_requests_total", nil) },
		"cpu":    func(x benchkit.Metrics) float64 { return x.Sum("process_cpu_seconds_total", nil) },
	} {
		m[key] = sum(after) - sum(before)
	}
	n := float64(o.n)
	var calls []string
	bySystem, beforeBySystem := after.SumBy("keb_external_requests_total", "system"), before.SumBy("keb_external_requests_total", "system")
	for _, system := range slices.Sorted(maps.Keys(bySystem)) {
		calls = append(calls, fmt.Sprintf("%s=%.1f", system, (bySystem[system]-beforeBySystem[system])/n))
	}
	rate := n / res.elapsed.Seconds()
	line := fmt.Sprintf("e2e driver=%s n=%d c=%d provisionings_per_s=%.1f target=%.0f ratio=%.2f latency_p50_s=%.2f latency_max_s=%.2f "+
		"broker_cores=%.2f broker_cpu_ms_per_provisioning=%.1f engine_writes_per_provisioning=%.1f (claims=%.1f saves=%.1f) events_per_provisioning=%.1f external_requests_per_provisioning=%.1f (%s)",
		driver, o.n, o.c, rate, target, rate/target, res.p50.Seconds(), res.max.Seconds(), m["cpu"]/res.elapsed.Seconds(), 1000*m["cpu"]/n,
		(m["claim"]+m["save"])/n, m["claim"]/n, m["save"]/n, m["events"]/n, m["calls"]/n, strings.Join(calls, " "))
	if db != nil {
		rows, perTable, err := rowsWritten(db)
		if err != nil {
			return nil, err
		}
		var parts []string
		for _, t := range perTable {
			parts = append(parts, fmt.Sprintf("%s=%.1f", t.name, float64(t.rows)/n))
		}
		line += fmt.Sprintf(" rows_written_per_provisioning=%.1f (%s)", float64(rows)/n, strings.Join(parts, " "))
		if pgLine := pgFigures.Line(n, res.elapsed.Seconds(), "provisioning"); pgLine != "" {
			line += " " + pgLine
		}
	}
	if machineOK {
		line += fmt.Sprintf(" machine_busy=%.2f machine_cpu_ms_per_provisioning=%.1f", machineShare, machineMs)
	}
	fmt.Println(line)
	return &figure{rate: rate, machineMs: machineMs, machineOK: machineOK}, nil
}

type result struct {
	elapsed, p50, max time.Duration
}

// load provisions o.n instances with o.c in flight; each client waits for its instance's
// provisioning to succeed. Any failure ends the run: a fast failure is not throughput.
func load(client *http.Client, base string, o options) (result, error) {
	osb := benchkit.Client{HTTP: client, Base: base, Username: username, Password: password}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var mu sync.Mutex
	var latencies []time.Duration
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.c)
	var tick *time.Ticker
	if o.rate > 0 {
		tick = time.NewTicker(time.Duration(float64(time.Second) / o.rate))
		defer tick.Stop()
	}
	for i := 1; i <= o.n && gctx.Err() == nil; i++ {
		if tick != nil {
			select {
			case <-tick.C:
			case <-gctx.Done():
			}
		}
		g.Go(func() error {
			began := time.Now()
			if err := provision(gctx, osb, i, o.poll); err != nil {
				return err
			}
			mu.Lock()
			latencies = append(latencies, time.Since(began))
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	elapsed := time.Since(start)
	if err != nil {
		return result{}, err
	}
	if len(latencies) < o.n {
		return result{}, fmt.Errorf("only %d of %d provisionings succeeded within %s", len(latencies), o.n, o.timeout)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return result{elapsed: elapsed, p50: latencies[len(latencies)/2], max: latencies[len(latencies)-1]}, nil
}

// provision sends one provisioning and polls its last_operation until it succeeded.
func provision(ctx context.Context, osb benchkit.Client, i int, poll time.Duration) error {
	id, op, err := osb.Provision(ctx, "bench", i, 50)
	if err != nil {
		return err
	}
	path := "/v2/service_instances/" + id + "/last_operation?operation=" + url.QueryEscape(op)
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("provisioning %s: %w", id, ctx.Err())
		case <-time.After(poll):
		}
		var last struct {
			State       string `json:"state"`
			Description string `json:"description"`
		}
		status, _, err := osb.Call(ctx, http.MethodGet, path, nil, &last)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("last_operation of %s: HTTP %d", id, status)
		}
		switch last.State {
		case "succeeded":
			return nil
		case "failed":
			return fmt.Errorf("provisioning %s failed: %s", id, last.Description)
		}
	}
}

type tableRows struct {
	name string
	rows int64
}

// rowsWritten reads the rows inserted, updated and deleted in the database, in total and per table.
func rowsWritten(db *sql.DB) (int64, []tableRows, error) {
	// Statistics reach the views shortly after the transactions that made them.
	time.Sleep(1500 * time.Millisecond)
	rows, err := db.Query(`SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables
		WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY 2 DESC, 1`)
	if err != nil {
		return 0, nil, fmt.Errorf("reading pg_stat_user_tables: %w", err)
	}
	defer rows.Close()
	var total int64
	var out []tableRows
	for rows.Next() {
		var t tableRows
		if err := rows.Scan(&t.name, &t.rows); err != nil {
			return 0, nil, err
		}
		if t.name == "schema_migrations" {
			continue
		}
		total += t.rows
		out = append(out, t)
	}
	return total, out, rows.Err()
}
