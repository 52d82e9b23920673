// Package replicatest runs orchestrations on PostgreSQL with several replicas.
package replicatest_test

import (
	"context"
	"io"
	"net/http"
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
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
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

// Fleet churn: while two replicas run a Kyma upgrade of every runtime, half of the runtimes (the
// last in the orchestration's order) are deprovisioned through the other replica. Their rows are
// skipped, never started and never failed, and the orchestration succeeds; no upgrade starts on an
// instance whose deprovisioning was accepted before its row's turn.
func TestUpgradeDuringDeprovisioningChurn(t *testing.T) {
	const n = 40
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
	b2 := bt.Start(t, bt.Options{DatabaseURL: url, LogOutput: logs, Externals: func(c *externals.Config) {
		standins.PointAt(c, b1.SandboxURL, standins.DefaultCredentials())
	}})
	ids := ot.Fleet(t, b1, n, 4)
	gone := ids[n/2:]
	id := ot.UpgradeKyma(t, b2, "2.21.0", 2, map[string]any{"target": "all"})

	// Deprovision the tail through the replica that did not create the orchestration, at once.
	deps := make([]string, len(gone))
	var wg sync.WaitGroup
	for i, inst := range gone {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b1.Delete(bt.DeprovisionPath(inst, bt.AWSPlanID))
			if assert.Equal(t, http.StatusAccepted, r.Status, "deprovisioning %s: %s", inst, r) {
				deps[i] = r.Operation()
			}
		}()
	}
	wg.Wait()

	st := ot.Wait(t, b1, id, 3*time.Minute, nil, func(st dto.StatusResponse) {
		assert.LessOrEqual(t, st.OperationStats[dto.InProgress], 2)
		assert.Zero(t, st.OperationStats[dto.Failed], "no row fails: %v", st.OperationStats)
	})
	for i, inst := range gone {
		if deps[i] != "" {
			b1.WaitSucceeded(inst, deps[i])
		}
	}
	ops := ot.Operations(t, b2, id)
	require.Len(t, ops, n)
	rowOf := map[string]dto.OperationResponse{}
	for _, op := range ops {
		rowOf[op.InstanceID] = op
	}

	// From the database: when each instance's deprovisioning was accepted and its upgrades.
	ctx := context.Background()
	page, err := b1.Store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: ids, Paging: storage.Paging{PageSize: 1000}})
	require.NoError(t, err)
	accepted := map[string]time.Time{}
	upgrades := map[string][]storage.Operation{}
	for _, op := range page.Items {
		switch op.Type {
		case storage.TypeDeprovision:
			accepted[op.InstanceID] = op.CreatedAt
		case storage.TypeUpgradeKyma:
			upgrades[op.InstanceID] = append(upgrades[op.InstanceID], op)
		}
	}
	lateStart := 0 // tail rows that started before their deprovisioning was accepted
	for _, inst := range ids {
		row := rowOf[inst]
		dep, deprovisioned := accepted[inst]
		if !deprovisioned {
			assert.Equal(t, dto.Succeeded, row.State, "%s: %s", inst, row.Description)
			assert.Len(t, upgrades[inst], 1, inst)
			continue
		}
		if row.State == dto.Skipped {
			assert.Empty(t, upgrades[inst], "no upgrade of skipped %s", inst)
			assert.Nil(t, row.StartedAt, inst)
			assert.Contains(t, row.Description, "deprovisioning operation ", inst)
			continue
		}
		// Its row started before the deprovisioning came: the upgrade ran, the deprovisioning waited.
		lateStart++
		require.Len(t, upgrades[inst], 1, inst)
		require.NotNil(t, row.StartedAt, inst)
		assert.True(t, row.StartedAt.Before(dep), "upgrade of %s started at %s, after its deprovisioning was accepted at %s", inst, row.StartedAt, dep)
		assert.Equal(t, dto.Succeeded, row.State, "%s: %s", inst, row.Description)
	}
	t.Logf("%d runtimes, %d deprovisioned during the orchestration: %s %q %v (rows started before their deprovisioning: %d); %s from creation to the end",
		n, len(gone), st.State, st.Description, st.OperationStats, lateStart, st.UpdatedAt.Sub(st.CreatedAt).Round(time.Millisecond))
	require.Equal(t, dto.Succeeded, st.State, st.Description)
	assert.Zero(t, st.OperationStats[dto.Failed])
	assert.Equal(t, n/2, st.OperationStats[dto.Skipped], "every deprovisioned runtime's row was skipped (none had started)")
	assert.Equal(t, n/2, st.OperationStats[dto.Succeeded])

	r := b2.Put("/orchestrations/"+id+"/retry", nil)
	assert.Equal(t, http.StatusConflict, r.Status, "a succeeded orchestration (skips included) has nothing to retry: %s", r)
}
