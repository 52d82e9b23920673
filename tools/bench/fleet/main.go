// Command fleet measures the broker at fleet scale (issue 16): it builds and runs the real broker
// binary (./cmd/broker) on a fresh PostgreSQL database (KEB_TEST_DATABASE_URL; `make bench-fleet`
// starts a throwaway server), with the embedded provisioner's simulated clusters taking
// -cluster (30 minutes) to create, creates -in-flight provisionings over OSB, then for -window
// samples every -sample: the lag of the oldest due, unleased active operation (now - its due
// time), step runs per second (the broker's keb_step_duration_seconds counts), the broker's RSS
// (/proc/<pid>/status VmRSS), the events table's rows and the database's size. It prints one
// line with the maxima and rates and the targets beside them, stops the broker and drops the
// database. Bench tooling, not part of the product.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/lib/pq"
	"golang.org/x/sync/errgroup"

	"github.com/kyma-project/kyma-environment-broker/tools/bench/benchkit"
)

// Targets of issue 16 at 20,000 in flight.
const (
	targetLag = 5 * time.Second
	targetRSS = 200 << 20
)

const (
	user     = "fleet"
	password = "fleet-bench-password"
)

type options struct {
	inFlight    int
	window      time.Duration
	sample      time.Duration
	cluster     time.Duration
	settle      time.Duration
	concurrency int
	pprofDir    string
	env         string
}

func main() {
	var o options
	flag.IntVar(&o.inFlight, "in-flight", 20000, "provisionings to create and keep in flight")
	flag.DurationVar(&o.window, "window", 3*time.Minute, "how long to measure once all are in flight")
	flag.DurationVar(&o.sample, "sample", 5*time.Second, "sampling interval")
	flag.DurationVar(&o.cluster, "cluster", 30*time.Minute, "how long a simulated cluster takes to create")
	flag.DurationVar(&o.settle, "settle", 40*time.Minute, "how long the fleet may take to reach its wait on the clusters; 0 measures at once, while it goes through its first steps")
	flag.IntVar(&o.concurrency, "concurrency", 16, "OSB provisioning requests in flight while creating")
	flag.StringVar(&o.pprofDir, "pprof", "", "write the broker's heap and CPU profiles (window, from its APP_PPROF_ADDRESS) here")
	flag.StringVar(&o.env, "env", "", "extra broker environment, comma-separated NAME=VALUE")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	server := os.Getenv("KEB_TEST_DATABASE_URL")
	if server == "" {
		return errors.New("KEB_TEST_DATABASE_URL is not set (make bench-fleet starts a throwaway PostgreSQL)")
	}
	if o.pprofDir != "" {
		// Made now: a run learning at its end that it cannot write its profiles loses its figures.
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
	}
	dbURL, drop, err := benchkit.FreshDatabase(ctx, server, "keb_fleet")
	if err != nil {
		return err
	}
	defer drop()
	dir, err := os.MkdirTemp("", "keb-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := benchkit.BuildBroker(ctx, "", dir)
	if err != nil {
		return err
	}
	b, err := startBroker(ctx, bin, dir, dbURL, o)
	if err != nil {
		return err
	}
	defer b.Stop()
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()

	s := &sampler{db: db, broker: b}
	start := time.Now()
	created, err := create(ctx, b, o, s)
	if err != nil {
		return err
	}
	createTook := time.Since(start)
	fmt.Printf("fleet: created %d provisionings in %s (%.0f/s); settling\n",
		created, createTook.Round(time.Second), float64(created)/createTook.Seconds())
	settleTook, settled, err := settle(ctx, o, s)
	if err != nil {
		return err
	}
	switch {
	case o.settle == 0:
		fmt.Printf("fleet: -settle 0: measuring for %s at once, while the fleet goes through its first steps\n", o.window)
	case settled:
		fmt.Printf("fleet: settled %s after the last creation (%s after the first); measuring for %s\n",
			settleTook.Round(time.Second), time.Since(start).Round(time.Second), o.window)
	default:
		fmt.Printf("fleet: NOT SETTLED: the due lag stayed above %s for -settle %s; measuring for %s anyway\n", targetLag, o.settle, o.window)
	}
	var profile func() error
	if o.pprofDir != "" {
		profile = b.cpuProfile(ctx, o.pprofDir, min(o.window, 30*time.Second))
	}
	first, err := s.take(ctx)
	if err != nil {
		return err
	}
	first.print("window")
	samples := []sample{first}
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	end := time.Now().Add(o.window)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		x, err := s.take(ctx)
		if err != nil {
			return err
		}
		x.print("window")
		samples = append(samples, x)
	}
	if profile != nil {
		if err := profile(); err != nil {
			return err
		}
		if err := b.heapProfile(ctx, filepath.Join(o.pprofDir, "heap.pb.gz")); err != nil {
			return err
		}
	}
	summarize(o, samples)
	return states(ctx, db)
}

// states prints the operations by type and state, with one description of each: a fleet that
// failed instead of waiting is no measurement.
func states(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT type, state, COUNT(*), MAX(description) FROM operations GROUP BY type, state ORDER BY type, state`)
	if err != nil {
		return fmt.Errorf("counting operations by state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, state, desc string
		var n int
		if err := rows.Scan(&typ, &state, &n, &desc); err != nil {
			return err
		}
		fmt.Printf("  operations %s %s: %d (e.g. %q)\n", typ, state, n, desc)
	}
	return rows.Err()
}

// settle waits until the fleet has gone through its first steps and waits on its clusters: the
// due lag within the target at two samples in a row, for at most -settle (then settled is false).
// New provisionings run their first steps (the external systems, the runtime request) back to
// back; the measurement is of the fleet waiting.
func settle(ctx context.Context, o options, s *sampler) (took time.Duration, settled bool, err error) {
	if o.settle == 0 {
		return 0, false, nil
	}
	start := time.Now()
	calm := 0
	for calm < 2 {
		if time.Since(start) > o.settle {
			return time.Since(start), false, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(o.sample):
		}
		x, err := s.take(ctx)
		if err != nil {
			return 0, false, err
		}
		x.print("settling")
		if x.lag <= targetLag {
			calm++
		} else {
			calm = 0
		}
	}
	return time.Since(start), true, nil
}

// --- the database ---

// --- the broker ---

// broker is the broker process and its addresses.
type broker struct {
	*benchkit.Broker
	base  string
	pprof string
}

func startBroker(ctx context.Context, bin, dir, dbURL string, o options) (*broker, error) {
	addrs := make([]string, 4)
	for i := range addrs {
		a, err := benchkit.FreeAddress()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	set := fmt.Sprintf(`{"simulated":{"type":"simulated","spec":{"creationDuration":%q}}}`, o.cluster.String())
	env := append(os.Environ(),
		"APP_HOST=127.0.0.1", "APP_PORT="+port,
		"APP_SANDBOX_ADDRESS="+addrs[1], "APP_SANDBOX_TLS_ADDRESS="+addrs[2],
		"APP_DATABASE_DRIVER=postgres", "APP_DATABASE_URL="+dbURL,
		"APP_DATABASE_SECRET_KEY="+strings.Repeat("f", 32),
		"APP_BROKER_USERNAME="+user, "APP_BROKER_PASSWORD="+password,
		"APP_PROVISIONER_SET_JSON="+set,
		"APP_LOG_LEVEL=warn", "APP_LOG_FORMAT=json",
		"APP_PPROF_ADDRESS="+addrs[3],
	)
	for _, kv := range strings.Split(o.env, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			env = append(env, kv)
		}
	}
	base := "http://" + net.JoinHostPort("127.0.0.1", port)
	p, err := benchkit.StartBroker(ctx, bin, dir, "broker.log", base, env)
	if err != nil {
		return nil, err
	}
	return &broker{Broker: p, base: base, pprof: "http://" + addrs[3]}, nil
}

// stepRuns is the sum of the broker's keb_step_duration_seconds counts.
func (b *broker) stepRuns(ctx context.Context) (float64, error) {
	m, err := benchkit.ReadMetrics(ctx, http.DefaultClient, b.base)
	if err != nil {
		return 0, err
	}
	return m.Sum("keb_step_duration_seconds", nil), nil
}

func (b *broker) rss() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.Pid()))
	if err != nil {
		return 0, fmt.Errorf("reading the broker's RSS: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in the broker's /proc status")
}

func (b *broker) fetch(ctx context.Context, path, dst string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.pprof+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s: %s", path, resp.Status)
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Printf("fleet: wrote %s\n", dst)
	return f.Close()
}

func (b *broker) heapProfile(ctx context.Context, dst string) error {
	return b.fetch(ctx, "/debug/pprof/heap?gc=1", dst)
}

// cpuProfile starts a CPU profile of d in the background; the returned func waits for it.
func (b *broker) cpuProfile(ctx context.Context, dir string, d time.Duration) func() error {
	done := make(chan error, 1)
	go func() {
		done <- b.fetch(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), filepath.Join(dir, "cpu.pb.gz"))
	}()
	return func() error { return <-done }
}

// --- creating the fleet ---

func create(ctx context.Context, b *broker, o options, s *sampler) (int, error) {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}}
	osb := benchkit.Client{HTTP: client, Base: b.base, Username: user, Password: password}
	var done atomic.Int64
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(cctx)
	g.SetLimit(o.concurrency)
	finished := make(chan error, 1)
	go func() {
		for i := 1; i <= o.inFlight && gctx.Err() == nil; i++ {
			g.Go(func() error {
				if _, _, err := osb.Provision(gctx, "fleet", i, 1000); err != nil {
					return err
				}
				done.Add(1)
				return nil
			})
		}
		finished <- g.Wait()
	}()
	tick := time.NewTicker(max(o.sample, 5*time.Second))
	defer tick.Stop()
	for {
		select {
		case err := <-finished:
			if err == nil {
				err = ctx.Err()
			}
			return int(done.Load()), err
		case <-tick.C:
			x, err := s.take(ctx)
			if err != nil {
				cancel()
				<-finished
				return int(done.Load()), err
			}
			x.print(fmt.Sprintf("creating %d/%d", done.Load(), o.inFlight))
		}
	}
}

// --- sampling ---

type sampler struct {
	db     *sql.DB
	broker *broker
}

type sample struct {
	at     time.Time
	lag    time.Duration
	active int64
	runs   float64
	rss    int64
	events int64
	dbSize int64
}

// lagSQL is the lag of the oldest operation that could be claimed now (active, due, not leased
// or its lease expired): how late the engine is.
const lagSQL = `SELECT COALESCE(EXTRACT(EPOCH FROM (now() - MIN(due_at))), 0) FROM operations
	WHERE state IN ('pending', 'in progress') AND due_at <= now() AND (lease_owner IS NULL OR lease_expires_at < now())`

func (s *sampler) take(ctx context.Context) (sample, error) {
	x := sample{at: time.Now()}
	var lag float64
	if err := s.db.QueryRowContext(ctx, lagSQL).Scan(&lag); err != nil {
		return x, fmt.Errorf("reading the due lag: %w", err)
	}
	x.lag = time.Duration(lag * float64(time.Second))
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM operations WHERE state IN ('pending', 'in progress')`).Scan(&x.active); err != nil {
		return x, fmt.Errorf("counting active operations: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM events`).Scan(&x.events); err != nil {
		return x, fmt.Errorf("counting events: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&x.dbSize); err != nil {
		return x, fmt.Errorf("reading the database size: %w", err)
	}
	var err error
	if x.runs, err = s.broker.stepRuns(ctx); err != nil {
		return x, err
	}
	if x.rss, err = s.broker.rss(); err != nil {
		return x, err
	}
	return x, nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func (x sample) print(phase string) {
	fmt.Printf("  %s %s: active=%d due_lag=%.1fs step_runs=%.0f rss=%.0fMB events=%d db=%.0fMB\n",
		x.at.Format("15:04:05"), phase, x.active, x.lag.Seconds(), x.runs, mb(x.rss), x.events, mb(x.dbSize))
}

func summarize(o options, samples []sample) {
	first, last := samples[0], samples[len(samples)-1]
	var maxLag time.Duration
	var maxRSS int64
	for _, x := range samples {
		maxLag = max(maxLag, x.lag)
		maxRSS = max(maxRSS, x.rss)
	}
	mins := last.at.Sub(first.at).Minutes()
	secs := last.at.Sub(first.at).Seconds()
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISSED"
	}
	fmt.Printf("fleet: in_flight=%d (active at end %d) cluster=%s window=%s | due_lag_max=%.1fs (target <= %s: %s) | "+
		"rss_max=%.0fMB (target < %dMB: %s) | step_runs/s=%.0f | events +%.0f rows/min (%d total) | database +%.1f MB/min (%.0f MB total)\n",
		o.inFlight, last.active, o.cluster, last.at.Sub(first.at).Round(time.Second),
		maxLag.Seconds(), targetLag, verdict(maxLag <= targetLag),
		mb(maxRSS), targetRSS>>20, verdict(maxRSS < targetRSS),
		(last.runs-first.runs)/secs,
		float64(last.events-first.events)/mins, last.events,
		mb(last.dbSize-first.dbSize)/mins, mb(last.dbSize))
}
