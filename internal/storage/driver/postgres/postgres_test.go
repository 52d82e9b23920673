package postgres_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

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
			saved, err := s.Operations().SaveProgress(ctx, op, []storage.Event{
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
