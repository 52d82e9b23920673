package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/static"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var ctx = context.Background()

const secretKey = "0123456789abcdef0123456789abcdef"

// forEachDriver runs fn against a fresh SQLite and a fresh PostgreSQL store.
func forEachDriver(t *testing.T, fn func(t *testing.T, s storage.Store)) {
	for _, name := range []string{driver.SQLite, driver.Postgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := driver.Config{Driver: name, SecretKey: secretKey}
			if name == driver.Postgres {
				cfg.URL = pgtest.NewDatabase(t)
			} else {
				cfg.Path = filepath.Join(t.TempDir(), "keb.db")
			}
			s, err := driver.Open(ctx, cfg, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			fn(t, s)
		})
	}
}

func pool(t *testing.T, s storage.Store, name string, spec static.Spec, log logrus.FieldLogger) *static.Backend {
	t.Helper()
	b, err := static.New(name, spec, s.StaticAllocations(), log)
	require.NoError(t, err)
	return b
}

func threeHosts(t *testing.T) static.Spec {
	kcFile := filepath.Join(t.TempDir(), "kubeconfig-c.yaml")
	require.NoError(t, os.WriteFile(kcFile, []byte("kubeconfig of c"), 0o600))
	return static.Spec{Runtimes: []static.Host{
		{Host: "a", Slots: 10, Kubeconfig: "kubeconfig of a", Domain: "a.example.com"},
		{Host: "b", Slots: 10, Kubeconfig: "kubeconfig of b", Domain: "b.example.com"},
		{Host: "c", Slots: 10, KubeconfigPath: kcFile, Domain: "c.example.com"},
	}}
}

func rt(id string) infrastructure.Spec { return infrastructure.Spec{RuntimeID: id, Name: "n-" + id} }

func TestConcurrentCreate(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s storage.Store) {
		b := pool(t, s, "pool-a", threeHosts(t), nil)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			ok, full int
			other    []error
		)
		start := make(chan struct{})
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := b.Create(ctx, rt(fmt.Sprintf("rt-%02d", i)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, infrastructure.ErrNoCapacity):
					full++
					assert.Contains(t, err.Error(), `"pool-a"`, "the error names the pool")
				default:
					other = append(other, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Empty(t, other)
		assert.Equal(t, 30, ok)
		assert.Equal(t, 20, full)
		used, err := s.StaticAllocations().UsedSlots(ctx, "pool-a")
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"a": 10, "b": 10, "c": 10}, used)
	})
}

func TestLifecycle(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s storage.Store) {
		b := pool(t, s, "pool-b", threeHosts(t), nil)
		spec := rt("rt-1")

		_, err := b.Status(ctx, spec)
		assert.ErrorIs(t, err, infrastructure.ErrNotFound, "no allocation yet")
		gone, err := b.Deleted(ctx, spec)
		require.NoError(t, err)
		assert.True(t, gone)

		require.NoError(t, b.Create(ctx, spec))
		require.NoError(t, b.Create(ctx, spec), "idempotent")
		used, err := s.StaticAllocations().UsedSlots(ctx, "pool-b")
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"a": 1}, used, "the first host by name among the emptiest; once")

		st, err := b.Status(ctx, spec)
		require.NoError(t, err)
		assert.Equal(t, infrastructure.Status{Domain: "a.example.com", Phase: infrastructure.PhaseSucceeded}, st)
		kc, err := b.Kubeconfig(ctx, spec)
		require.NoError(t, err)
		assert.Equal(t, "kubeconfig of a", kc)

		rev, err := b.Update(ctx, spec)
		require.NoError(t, err)
		assert.Zero(t, rev)
		assert.Equal(t, rev, st.ObservedRevision, "Status reports the revision Update returned")

		err = b.Hibernate(ctx, spec)
		assert.ErrorIs(t, err, infrastructure.ErrNotSupported)

		// The next two runtimes go to b and c; c's kubeconfig comes from a file.
		require.NoError(t, b.Create(ctx, rt("rt-2")))
		require.NoError(t, b.Create(ctx, rt("rt-3")))
		kc, err = b.Kubeconfig(ctx, rt("rt-3"))
		require.NoError(t, err)
		assert.Equal(t, "kubeconfig of c", kc)

		gone, err = b.Deleted(ctx, spec)
		require.NoError(t, err)
		assert.False(t, gone)
		require.NoError(t, b.Delete(ctx, spec))
		require.NoError(t, b.Delete(ctx, spec), "deleting twice is fine")
		gone, err = b.Deleted(ctx, spec)
		require.NoError(t, err)
		assert.True(t, gone)
		_, err = b.Kubeconfig(ctx, spec)
		assert.ErrorIs(t, err, infrastructure.ErrNotFound)
		_, err = b.Update(ctx, spec)
		assert.ErrorIs(t, err, infrastructure.ErrNotFound)

		other := pool(t, s, "pool-other", threeHosts(t), nil)
		_, err = other.Status(ctx, rt("rt-2"))
		assert.ErrorIs(t, err, infrastructure.ErrNotFound, "pools are separate")
	})
}

func TestCapacityWarning(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s storage.Store) {
		log, hook := test.NewNullLogger()
		b := pool(t, s, "small", static.Spec{Runtimes: []static.Host{{Host: "h", Slots: 5, Kubeconfig: "x", Domain: "d"}}}, log)
		warnings := func() int {
			n := 0
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "80%") {
					n++
				}
			}
			return n
		}
		for i := range 4 {
			require.NoError(t, b.Create(ctx, rt(fmt.Sprintf("rt-%d", i))))
		}
		assert.Zero(t, warnings(), "4 of 5 slots is 80%, not over it")
		require.NoError(t, b.Create(ctx, rt("rt-4")))
		assert.Equal(t, 1, warnings())
		last := hook.LastEntry()
		assert.Equal(t, "small", last.Data["pool"])
		assert.Equal(t, "h", last.Data["host"])
		assert.Equal(t, 5, last.Data["used_slots"])
	})
}

func TestSlotsPerRuntime(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s storage.Store) {
		b := pool(t, s, "big", static.Spec{SlotsPerRuntime: 4, Runtimes: []static.Host{
			{Host: "x", Slots: 10, Kubeconfig: "k", Domain: "x.d"},
			{Host: "y", Slots: 5, Kubeconfig: "k", Domain: "y.d"},
		}}, nil)
		for i := range 3 {
			require.NoError(t, b.Create(ctx, rt(fmt.Sprintf("rt-%d", i))))
		}
		err := b.Create(ctx, rt("rt-3"))
		assert.ErrorIs(t, err, infrastructure.ErrNoCapacity, "x has 2 and y 1 slot left")
		used, err := s.StaticAllocations().UsedSlots(ctx, "big")
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"x": 8, "y": 4}, used)
	})
}

func TestFactoryAndValidation(t *testing.T) {
	deps := infrastructure.Deps{Static: staticStub{}}
	b, err := static.Factory(ctx, infrastructure.Entry{Name: "p", Type: static.Type,
		Spec: json.RawMessage(`{"runtimes": [{"host": "h", "slots": 3, "kubeconfig": "k", "domain": "d"}]}`)}, deps)
	require.NoError(t, err)
	require.NotNil(t, b)

	for raw, want := range map[string]string{
		`{}`: "spec.runtimes must list at least one host",
		`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k", "domain": "d"}, {"host": "i", "slots": 0, "kubeconfig": "k", "domain": "d"}]}`: "spec.runtimes[1].slots must be > 0",
		`{"runtimes": [{"slots": 1, "kubeconfig": "k", "domain": "d"}]}`:                                                                           "spec.runtimes[0].host is required",
		`{"runtimes": [{"host": "h", "slots": 1, "domain": "d"}]}`:                                                                                 "spec.runtimes[0]: kubeconfig or kubeconfig_path is required",
		`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k", "kubeconfig_path": "p", "domain": "d"}]}`:                                      "not both",
		`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k"}]}`:                                                                             "spec.runtimes[0].domain is required",
		`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k", "domain": "d"}, {"host": "h", "slots": 1, "kubeconfig": "k", "domain": "d"}]}`: "spec.runtimes[1].host \"h\" is already",
		`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k", "domain": "d"}], "slots_per_runtime": 2}`:                                      "no host has that many slots",
		`{"runtimes": [{"host": "h", "slots": "1", "kubeconfig": "k", "domain": "d"}]}`:                                                            "spec.runtimes.slots must be int",
		`{"runtimes": [], "data_dir": "/mnt"}`:                                                                                                     `unknown field "data_dir"`,
	} {
		_, err := static.Factory(ctx, infrastructure.Entry{Name: "p", Type: static.Type, Spec: json.RawMessage(raw)}, deps)
		assert.ErrorContains(t, err, want, raw)
	}
	_, err = static.Factory(ctx, infrastructure.Entry{Name: "p", Spec: json.RawMessage(`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k", "domain": "d"}]}`)}, infrastructure.Deps{})
	assert.ErrorContains(t, err, "static allocations storage")
}

// staticStub satisfies the interface for validation tests that never allocate.
type staticStub struct{ storage.StaticAllocations }
