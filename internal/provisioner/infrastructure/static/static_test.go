package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/seed004"
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

// threeHosts is a pool without cluster credentials (the backends' scoped credentials are
// tested against a real API server in internal/provisioner/e2e).
func threeHosts(*testing.T) static.Spec {
	return static.Spec{Runtimes: []static.Host{
		{Host: "a", Slots: 10, Domain: "a.example.com"},
		{Host: "http://b.example.com:9091", Slots: 10, DataDir: "/mnt/b", AudienceURL: "http://b.example.com:8081"},
		{Host: "z", Slots: 10, Domain: "z.example.com"},
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
		assert.Equal(t, map[string]int{"a": 10, "http://b.example.com:9091": 10, "z": 10}, used)
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
		assert.Equal(t, infrastructure.Status{Domain: "a.example.com", Phase: infrastructure.PhaseSucceeded,
			Allocation: &infrastructure.Allocation{Host: "a", Slots: 1}}, st)
		kc, err := b.Kubeconfig(ctx, spec)
		require.NoError(t, err)
		assert.Empty(t, kc, "a host without a kubeconfig has no cluster credentials to hand out")
		_, err = b.IssueCredentials(ctx, spec, "binding", time.Hour)
		assert.ErrorIs(t, err, infrastructure.ErrNotSupported)

		rev, err := b.Update(ctx, spec)
		require.NoError(t, err)
		assert.Zero(t, rev)
		assert.Equal(t, rev, st.ObservedRevision, "Status reports the revision Update returned")

		err = b.Hibernate(ctx, spec)
		assert.ErrorIs(t, err, infrastructure.ErrNotSupported)

		// The next runtime goes to b, whose domain comes from its URL.
		require.NoError(t, b.Create(ctx, rt("rt-2")))
		st, err = b.Status(ctx, rt("rt-2"))
		require.NoError(t, err)
		assert.Equal(t, infrastructure.Status{Domain: "b.example.com", Phase: infrastructure.PhaseSucceeded,
			Allocation: &infrastructure.Allocation{Host: "http://b.example.com:9091", AudienceURL: "http://b.example.com:8081", DataDir: "/mnt/b", Slots: 1}}, st)

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
		b := pool(t, s, "small", static.Spec{Runtimes: []static.Host{{Host: "h", Slots: 5, Domain: "d"}}}, log)
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
			{Host: "x", Slots: 10, Domain: "x.d"},
			{Host: "y", Slots: 5, Domain: "y.d"},
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

// TestSeedExample: seed 004's static example, as written (// comments included), is a pool.
func TestSeedExample(t *testing.T) {
	doc, err := seed004.SetJSON()
	require.NoError(t, err)
	entries, _, err := infrastructure.LoadSet(infrastructure.Config{SetJSON: doc, Default: "static-example"})
	require.NoError(t, err)
	forEachDriver(t, func(t *testing.T, s storage.Store) {
		var built infrastructure.Backend
		for _, e := range entries {
			if e.Name == "static-example" {
				built, err = static.Factory(ctx, e, infrastructure.Deps{Static: s.StaticAllocations()})
				require.NoError(t, err)
			}
		}
		require.NotNil(t, built)
		spec := rt("seed-rt")
		require.NoError(t, built.Create(ctx, spec))
		st, err := built.Status(ctx, spec)
		require.NoError(t, err)
		assert.Equal(t, infrastructure.Status{Domain: "localhost", Phase: infrastructure.PhaseSucceeded, Allocation: &infrastructure.Allocation{
			Host: "http://localhost:9091", AudienceURL: "http://localhost:8081", DataDir: "/mnt/data", Slots: 1}}, st)
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
		`{"runtimes": [{"host": "h", "slots": 1, "domain": "d"}, {"host": "i", "slots": 0, "domain": "d"}]}`:  "spec.runtimes[1].slots must be > 0",
		`{"runtimes": [{"slots": 1, "domain": "d"}]}`:                                                         "spec.runtimes[0].host is required",
		`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k", "kubeconfig_path": "p", "domain": "d"}]}`: "not both",
		`{"runtimes": [{"host": "h", "slots": 1}]}`:                                                           "spec.runtimes[0].domain is required when host is not a URL",
		`{"runtimes": [{"host": "ftp://h", "slots": 1}]}`:                                                     "spec.runtimes[0].host \"ftp://h\" must be an http(s) URL",
		`{"runtimes": [{"host": "http://h", "slots": 1, "audience_url": "nope"}]}`:                            "spec.runtimes[0].audience_url",
		`{"runtimes": [{"host": "http://h", "slots": 1, "data_dir": "data"}]}`:                                "spec.runtimes[0].data_dir",
		`{"runtimes": [{"host": "h", "slots": 1, "domain": "d"}, {"host": "h", "slots": 1, "domain": "d"}]}`:  "spec.runtimes[1].host \"h\" is already",
		`{"runtimes": [{"host": "h", "slots": 1, "domain": "d"}], "slots_per_runtime": 2}`:                    "no host has that many slots",
		`{"runtimes": [{"host": "h", "slots": "1", "domain": "d"}]}`:                                          "spec.runtimes.slots must be int",
		`{"runtimes": [{"host": "h", "slots": 1, "domain": "d"}], "token_expiration_seconds": 10}`:            "spec.token_expiration_seconds must be at least 600",
		`{"runtimes": [], "cpu": 2}`: `unknown field "cpu"`,
	} {
		_, err := static.Factory(ctx, infrastructure.Entry{Name: "p", Type: static.Type, Spec: json.RawMessage(raw)}, deps)
		assert.ErrorContains(t, err, want, raw)
	}
	_, err = static.Factory(ctx, infrastructure.Entry{Name: "p", Spec: json.RawMessage(`{"runtimes": [{"host": "h", "slots": 1, "kubeconfig": "k", "domain": "d"}]}`)}, infrastructure.Deps{})
	assert.ErrorContains(t, err, "static allocations storage")
}

// staticStub satisfies the interface for validation tests that never allocate.
type staticStub struct{ storage.StaticAllocations }
