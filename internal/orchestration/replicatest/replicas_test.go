// Package replicatest runs orchestrations on PostgreSQL with several replicas.
package replicatest_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/orchestration"
	ot "github.com/kyma-project/kyma-environment-broker/internal/orchestration/orchestrationtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// leaders counts the schedulers leading at once and remembers the most.
type leaders struct {
	mu        sync.Mutex
	now, most int
	which     int
	changes   chan int
}

func (l *leaders) hook(i int) func(bool) {
	return func(lead bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if lead {
			l.now++
			l.which = i
			l.changes <- i
		} else {
			l.now--
		}
		l.most = max(l.most, l.now)
	}
}

// Two schedulers on one database: one leads; when it stops, the other takes over; never both.
func TestOneSchedulerAtATime(t *testing.T) {
	url := pgtest.NewDatabase(t)
	log := logrus.New()
	log.SetOutput(io.Discard)
	catalog, err := catalog.FromConfig(catalog.Config{})
	require.NoError(t, err)
	l := &leaders{changes: make(chan int, 10)}
	cancels := make([]context.CancelFunc, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		store, err := driver.Open(context.Background(), driver.Config{Driver: driver.Postgres, URL: url, SecretKey: strings.Repeat("k", 32)}, log)
		require.NoError(t, err)
		t.Cleanup(func() { store.Close() })
		m, err := orchestration.NewManager(store, broker.NewCatalog(catalog), orchestration.Config{PollInterval: 20 * time.Millisecond, LockRetryInterval: 50 * time.Millisecond}, log)
		require.NoError(t, err)
		s := m.Scheduler()
		s.OnLead = l.hook(i)
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, s.Run(ctx))
		}()
	}
	t.Cleanup(func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	})
	first := waitLeader(t, l)
	cancels[first]()
	second := waitLeader(t, l)
	assert.NotEqual(t, first, second, "the other replica took over")
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, 1, l.most, "never two schedulers at once")
}

func waitLeader(t *testing.T, l *leaders) int {
	t.Helper()
	select {
	case i := <-l.changes:
		return i
	case <-time.After(30 * time.Second):
		t.Fatal("no scheduler took the lock")
		return -1
	}
}

// Two broker replicas on one database run an orchestration: every runtime is upgraded exactly
// once and never more than the workers at once.
func TestTwoReplicasOneOrchestration(t *testing.T) {
	url := pgtest.NewDatabase(t)
	logs, err := os.Create(filepath.Join(t.TempDir(), "brokers.log"))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(logs.Name())
			t.Logf("brokers' log:\n%s", out)
		}
	})
	b1 := bt.Start(t, bt.Options{DatabaseURL: url, LogOutput: logs})
	// The second replica talks to the first one's external systems, as replicas do.
	b2 := bt.Start(t, bt.Options{DatabaseURL: url, LogOutput: logs, Externals: func(c *externals.Config) {
		standins.PointAt(c, b1.SandboxURL, standins.DefaultCredentials())
	}})
	ids := ot.Fleet(t, b1, 10, 2)
	id := ot.UpgradeKyma(t, b2, "2.21.0", 3, map[string]any{"target": "all"})
	st := ot.Wait(t, b1, id, time.Minute, nil, func(st dto.StatusResponse) {
		assert.LessOrEqual(t, st.OperationStats[dto.InProgress], 3)
	})
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	ops := ot.Operations(t, b2, id)
	assert.LessOrEqual(t, ot.MaxOverlap(t, b1.Store, ops), 3)
	ups := ot.UpgradesOf(t, b1.Store, ids)
	assert.Len(t, ups, 10)
	for inst, n := range ups {
		assert.Equal(t, 1, n, inst)
	}
}
