package postgres_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/postgres"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openerFor(url string) storagetest.Opener {
	return func(t *testing.T, kr *encryption.Keyring) storage.Store {
		s, err := postgres.Open(context.Background(), postgres.Config{URL: url, MaxOpenConns: 10}, kr, nil)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
}

func opener(t *testing.T) storagetest.Opener { return openerFor(pgtest.NewDatabase(t)) }

func TestConformance(t *testing.T) {
	storagetest.Run(t, opener)
}

func TestWakeupsAcrossStores(t *testing.T) {
	storagetest.WakeupsAcrossStores(t, opener(t))
}

func TestSingletonLockAcrossStores(t *testing.T) {
	storagetest.SingletonLockAcrossStores(t, opener(t))
}

func TestMigrateConcurrently(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	errs := make(chan error, 4)
	versions := make(chan int, 4)
	for i := 0; i < 4; i++ {
		go func() {
			v, err := postgres.Migrate(ctx, postgres.Config{URL: url}, nil)
			errs <- err
			versions <- v
		}()
	}
	latest, err := sqlstore.LatestVersion(postgres.Migrations())
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		require.NoError(t, <-errs)
		require.Equal(t, latest, <-versions)
	}
}

func TestDSN(t *testing.T) {
	c := postgres.Config{Host: "db", Port: 5433, User: "u", Password: "p@ss word", Name: "keb", SSLMode: "disable"}
	require.Equal(t, "postgres://u:p%40ss%20word@db:5433/keb?sslmode=disable", c.DSN())
	require.Equal(t, "postgres://x", postgres.Config{URL: "postgres://x", Host: "ignored"}.DSN())
}

// BenchmarkSaveProgress measures SaveProgress (operation update + 2 events, one transaction)
// with concurrent callers (goroutines, whatever GOMAXPROCS is), each on its own leased operation.
func BenchmarkSaveProgress(b *testing.B) {
	for _, events := range []int{2, 0} {
		for _, callers := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("events=%d/callers=%d", events, callers), func(b *testing.B) { benchmarkSaveProgress(b, events, callers) })
		}
	}
}

func benchmarkSaveProgress(b *testing.B, events, callers int) {
	ctx := context.Background()
	s := benchStore(b)
	const ops = 256
	now := time.Now()
	for i := 0; i < ops; i++ {
		_, err := s.Operations().InsertOperation(ctx, storage.Operation{ID: fmt.Sprint("op", i), InstanceID: fmt.Sprint("inst", i),
			Type: "provision", State: storage.StatePending, DueAt: &now, Deadline: now.Add(time.Hour),
			Secrets: storage.Secrets{"kubeconfig": "apiVersion: v1\nkind: Config\n"}, Data: []byte(`{"plan":"aws","region":"eu"}`)})
		require.NoError(b, err)
	}
	claimed, err := s.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: "bench", Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Limit: ops})
	require.NoError(b, err)
	require.Len(b, claimed, ops)
	var next atomic.Int64
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((callers + procs - 1) / procs)
	if callers < procs {
		runtime.GOMAXPROCS(callers)
		defer runtime.GOMAXPROCS(procs)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		op := claimed[next.Add(1)-1]
		i := 0
		for pb.Next() {
			i++
			op.Description = fmt.Sprint("step ", i)
			op.Progress.Steps = map[string]storage.StepProgress{"s": {FirstAttempt: now, Attempts: i}}
			saved, err := s.Operations().SaveProgress(ctx, op, storage.Save{}, []storage.Event{
				{Step: "s", Type: storage.EventStarted},
				{Step: "s", Type: storage.EventSucceeded, Duration: time.Millisecond},
			}[:events])
			if err != nil {
				b.Fatal(err)
			}
			op = saved
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "saves/s")
}

// BenchmarkNewestOperation measures reading an instance's newest operation (what last_operation
// and every new OSB request do) among 20,000 operations of 2,000 instances, with and without the
// total count of the instance's operations.
func BenchmarkNewestOperation(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	const instances, perInstance = 2000, 10
	now := time.Now()
	for i := 0; i < instances*perInstance; i++ {
		_, err := s.Operations().InsertOperation(ctx, storage.Operation{ID: fmt.Sprint("op", i), InstanceID: fmt.Sprint("inst", i%instances),
			Type: "update", State: storage.StateSucceeded, Deadline: now.Add(time.Hour), CreatedAt: now.Add(time.Duration(i) * time.Millisecond)})
		require.NoError(b, err)
	}
	for _, withoutTotal := range []bool{false, true} {
		b.Run(fmt.Sprintf("withoutTotal=%v", withoutTotal), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				page, err := s.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{fmt.Sprint("inst", i%instances)},
					Paging: storage.Paging{PageSize: 1, WithoutTotal: withoutTotal}})
				if err != nil || len(page.Items) != 1 {
					b.Fatal(err, len(page.Items))
				}
			}
		})
	}
}

// benchStore is a store on a new database of the test server, closed when the benchmark ends.
func benchStore(b *testing.B) storage.Store {
	kr, err := encryption.NewKeyring(storagetest.Key(b))
	require.NoError(b, err)
	s, err := postgres.Open(context.Background(), postgres.Config{URL: pgtest.NewDatabase(b)}, kr, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// TestClaimsReadDueOperationsInOrderWithoutStatistics: a claim reads the due operations in
// (due_at, id) order and stops after the few it takes, also while the planner has no statistics
// of a table that grew (a fresh database, a burst of creations) and whose due-time index holds
// the dead versions of earlier saves. Planned by the stale statistics, it read every active
// operation and sorted them on each claim (7-20 ms at 500 in flight). Buffers are counted by
// pg_stat_statements, which the test server preloads (scripts/postgres.sh).
func TestClaimsReadDueOperationsInOrderWithoutStatistics(t *testing.T) {
	ctx := context.Background()
	s, db := unanalyzedStore(t,
		`ALTER TABLE operations SET (autovacuum_enabled = false)`,
		// 2,000 waiting operations of ~1 KB each, due in the past.
		`INSERT INTO operations (id, instance_id, type, state, created_at, updated_at, version, due_at, description)
			SELECT 'op-' || g, 'inst-' || g, 'provision', 'pending', now(), now(), 1,
				now() - interval '1 hour' + g * interval '1 ms', repeat('x', 1000)
			FROM generate_series(1, 2000) g`,
		// Two saves each: the index keeps the old due times' entries until a vacuum.
		`UPDATE operations SET due_at = due_at + interval '1 microsecond'`,
		`UPDATE operations SET due_at = due_at + interval '1 microsecond'`)
	now := time.Now()
	// A claim on a new session loads the catalogs it plans with, and those reads count: one
	// that finds nothing due first (the pool then reuses its session).
	none, err := s.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w", Types: []string{"provision", "deprovision"},
		Now: now.Add(-24 * time.Hour), LeaseUntil: now.Add(time.Minute), Limit: 5})
	require.NoError(t, err)
	require.Empty(t, none)
	resetStatements(t, db)

	ops, err := s.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w", Types: []string{"provision", "deprovision"},
		Now: now, LeaseUntil: now.Add(time.Minute), Limit: 5})
	require.NoError(t, err)
	require.Len(t, ops, 5)
	for i, op := range ops {
		require.Equal(t, fmt.Sprintf("op-%d", i+1), op.ID, "the claim takes the earliest due")
	}
	buffers := statementBuffers(t, db, "UPDATE operations SET lease_owner%")
	t.Logf("the claim visited %d buffers", buffers)
	// In order: ~110 (index pages, the five rows, their new versions and index entries).
	// Reading and sorting every due operation: ~800.
	require.Less(t, buffers, int64(300), "buffers the claim visited")
}

// TestWakeReadsTheRuntimesOperationsWithoutStatistics: a wake by runtime (the provisioner's,
// once per provisioning) reads the runtime's instance and its operations through their indexes,
// also while the planner has no statistics (a fresh database, a burst of creations). As a semi
// join it started from the operations and read all of them on each wake (~1,900 buffers for
// 2,000 provisionings in the e2e bench's database).
func TestWakeReadsTheRuntimesOperationsWithoutStatistics(t *testing.T) {
	ctx := context.Background()
	s, db := unanalyzedStore(t,
		`ALTER TABLE operations SET (autovacuum_enabled = false)`,
		`ALTER TABLE instances SET (autovacuum_enabled = false)`,
		// Instances with ~1 KB of parameters, as the bench's: the planner, which estimates a
		// table without statistics from its pages, then expects several per runtime.
		`INSERT INTO instances (instance_id, runtime_id, created_at, updated_at, version, parameters)
			SELECT 'inst-' || g, 'rt-' || g, now(), now(), 1, repeat('p', 1000) FROM generate_series(1, 2000) g`,
		// Each instance's provisioning waits for its runtime, next due in an hour; the
		// provisioner's operation of the runtime is done.
		`INSERT INTO operations (id, instance_id, type, state, created_at, updated_at, version, due_at, description)
			SELECT 'op-' || g, 'inst-' || g, 'provision', 'in progress', now(), now(), 1,
				now() + interval '1 hour', repeat('x', 1000)
			FROM generate_series(1, 2000) g`,
		`INSERT INTO operations (id, instance_id, type, state, created_at, updated_at, version, description)
			SELECT 'rt-op-' || g, 'rt-' || g, 'provisioner_provision', 'succeeded', now(), now(), 1, repeat('x', 1000)
			FROM generate_series(1, 2000) g`)
	now := time.Now()
	// The first statement of a session loads the catalogs it plans with, and those reads count.
	none, err := s.Operations().Wake(ctx, storage.WakeRequest{RuntimeIDs: []string{"rt-none"}, Now: now})
	require.NoError(t, err)
	require.Empty(t, none)
	resetStatements(t, db)

	woken, err := s.Operations().Wake(ctx, storage.WakeRequest{RuntimeIDs: []string{"rt-1000"}, Now: now})
	require.NoError(t, err)
	require.Equal(t, []string{"op-1000"}, woken)
	buffers := statementBuffers(t, db, "UPDATE operations SET due_at%")
	t.Logf("the wake visited %d buffers", buffers)
	// Through the indexes: ~20. Reading every operation: ~4,700 here, ~1,900 in the e2e bench.
	require.Less(t, buffers, int64(100), "buffers the wake visited")
}

// unanalyzedStore opens a store on a new database, which the planner has no statistics of, runs
// the setup statements on it and readies pg_stat_statements, which the test server preloads
// (scripts/postgres.sh).
func unanalyzedStore(t *testing.T, setup ...string) (*sqlstore.Store, *sqlx.DB) {
	t.Helper()
	ctx := context.Background()
	kr, err := encryption.NewKeyring(storagetest.Key(t))
	require.NoError(t, err)
	s, err := postgres.OpenStore(ctx, postgres.Config{URL: pgtest.NewDatabase(t), MaxOpenConns: 4}, kr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	db := s.DB()
	for _, q := range append([]string{`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`}, setup...) {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	return s, db
}

// resetStatements forgets the statements of the test's database.
func resetStatements(t *testing.T, db *sqlx.DB) {
	t.Helper()
	_, err := db.ExecContext(context.Background(),
		`SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`)
	require.NoError(t, err)
}

// statementBuffers is the buffers the test database's statements like the pattern visited.
func statementBuffers(t *testing.T, db *sqlx.DB, like string) int64 {
	t.Helper()
	var buffers int64
	require.NoError(t, db.QueryRowContext(context.Background(), `SELECT COALESCE(SUM(shared_blks_hit + shared_blks_read), 0)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE $1`,
		like).Scan(&buffers))
	return buffers
}
