// Package storagetest is the conformance suite every storage driver passes.
package storagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
)

// Opener opens a Store on one database. Each call opens another Store on the same database
// (to test reopening, migrations and keys); the suite closes what it opens.
type Opener func(t *testing.T, kr *encryption.Keyring) storage.Store

// NewDatabase creates a fresh, empty database and returns how to open it.
type NewDatabase func(t *testing.T) Opener

// RawDB is implemented by stores whose raw database the suite may read (to check that secrets
// are not stored in plaintext). Its bind type must match the database (sqlx Rebind).
type RawDB interface {
	DB() *sqlx.DB
}

// Key returns a new random keyring primary key.
func Key(t testing.TB) string {
	t.Helper()
	k, err := encryption.GenerateKey()
	require.NoError(t, err)
	return k
}

// Keyring returns a keyring of the given keys (primary first).
func Keyring(t testing.TB, primary string, previous ...string) *encryption.Keyring {
	t.Helper()
	kr, err := encryption.NewKeyring(primary, previous...)
	require.NoError(t, err)
	return kr
}

type env struct {
	open Opener
	key  string
	s    storage.Store
}

func setup(t *testing.T, newDB NewDatabase) *env {
	t.Helper()
	e := &env{open: newDB(t), key: Key(t)}
	e.s = e.open(t, Keyring(t, e.key))
	return e
}

// Run runs the conformance suite; newDB is called once per test.
func Run(t *testing.T, newDB NewDatabase) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"InstanceCRUD", testInstanceCRUD},
		{"InstanceSecretsEncrypted", testInstanceSecretsEncrypted},
		{"OperationCRUD", testOperationCRUD},
		{"OperationSecretsEncrypted", testOperationSecretsEncrypted},
		{"ReadLastOperation", testReadLastOperation},
		{"TimesAreUTCMicroseconds", testTimes},
		{"OptimisticLocking", testOptimisticLocking},
		{"ConcurrentUpdatersOneWins", testConcurrentUpdaters},
		{"ListInstances", testListInstances},
		{"ListOperations", testListOperations},
		{"Events", testEvents},
		{"EventsFeed", testEventsFeed},
		{"BadPaging", testBadPaging},
		{"Claim", testClaim},
		{"ClaimConcurrent", testClaimConcurrent},
		{"SaveProgress", testSaveProgress},
		{"SaveProgressConflictWritesNoEvents", testSaveProgressConflict},
		{"SaveProgressRelease", testSaveProgressRelease},
		{"SaveProgressConcurrent", testSaveProgressConcurrent},
		{"SaveProgressKeptColumns", testSaveProgressKept},
		{"ExtendAndReleaseLeases", testLeases},
		{"ReclaimLeases", testReclaimLeases},
		{"LeaseExtensionAndSavesNeverDeadlock", testLeasesAndSavesNoDeadlock},
		{"FailOverdue", testFailOverdue},
		{"NextDueAtQueueDepthCount", testNextDueQueueCount},
		{"Wakeups", testWakeups},
		{"Wake", testWake},
		{"MigrationsIdempotent", testMigrationsIdempotent},
		{"RotateSecrets", testRotateSecrets},
		{"WrongKey", testWrongKey},
		{"Runtimes", testRuntimes},
		{"InstanceWithOperation", testInstanceWithOperation},
		{"Takers", testTakers},
		{"InstanceArchive", testInstanceArchive},
		{"InsertOperationExclusive", testInsertOperationExclusive},
		{"InsertUniqueInstance", testInsertUniqueInstance},
		{"RuntimeOperationsOneAtATime", testRuntimeOperationsOneAtATime},
		{"RuntimeOperationStatus", testRuntimeOperationStatus},
		{"SetInstanceFields", testSetInstanceFields},
		{"SaveProgressInstanceFields", testSaveProgressInstanceFields},
		{"SaveProgressRuntimeFields", testSaveProgressRuntimeFields},
		{"SetRuntimeFields", testSetRuntimeFields},
		{"StaticAllocations", testStaticAllocations},
		{"StaticAllocationIdempotent", testStaticAllocationIdempotent},
		{"StaticRelease", testStaticRelease},
		{"StaticAllocateConcurrent", testStaticAllocateConcurrent},
		{"Bindings", testBindings},
		{"ReadForBind", testReadForBind},
		{"Orchestrations", testOrchestrations},
		{"OrchestrationWorkersConcurrent", testOrchestrationWorkersConcurrent},
		{"OrchestrationSkipsDeprovisioned", testOrchestrationSkipsDeprovisioned},
		{"OrchestrationStartRacesDeprovisioning", testOrchestrationStartRacesDeprovisioning},
		{"SingletonLock", testSingletonLock},
		{"RuntimeStates", testRuntimeStates},
		{"RuntimeStateOfTheFirstOperation", testRuntimeStateOfTheFirstOperation},
		{"RuntimeSort", testRuntimeSort},
		{"Expire", testExpire},
		{"Retriggers", testRetriggers},
		{"ListLimits", testListLimits},
		{"Ping", func(t *testing.T, e *env) { require.NoError(t, e.s.Ping(context.Background())) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, setup(t, newDB))
		})
	}
}

var ctx = context.Background()

func ptr(t time.Time) *time.Time { return &t }

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func newInstance(id string) storage.Instance {
	return storage.Instance{
		InstanceID: id, RuntimeID: "rt-" + id, GlobalAccountID: "ga", SubAccountID: "sa-" + id,
		ServiceID: "svc", PlanID: "plan", ProviderRegion: "eu", DashboardURL: "https://dash/" + id,
		Parameters: json.RawMessage(`{"name":"` + id + `"}`),
	}
}

func newOp(id, instanceID, typ string, state storage.OperationState, due *time.Time) storage.Operation {
	return storage.Operation{
		ID: id, InstanceID: instanceID, Type: typ, State: state, Description: "d " + id,
		DueAt: due, Deadline: now().Add(time.Hour), Stage: "start",
		Data: json.RawMessage(`{"op":"` + id + `"}`),
	}
}

func mustInsertOp(t *testing.T, s storage.Store, op storage.Operation) storage.Operation {
	t.Helper()
	out, err := s.Operations().InsertOperation(ctx, op)
	require.NoError(t, err)
	return out
}

func rawSecrets(t *testing.T, s storage.Store, table, idCol, id string) []byte {
	t.Helper()
	r, ok := s.(RawDB)
	require.True(t, ok, "store %T must implement storagetest.RawDB", s)
	var b []byte
	require.NoError(t, r.DB().GetContext(ctx, &b, r.DB().Rebind("SELECT secrets FROM "+table+" WHERE "+idCol+" = ?"), id))
	return b
}

func testInstanceCRUD(t *testing.T, e *env) {
	is := e.s.Instances()
	in := newInstance("i1")
	in.Secrets = storage.Secrets{"kubeconfig": "apiVersion: v1"}
	before := now()
	got, err := is.InsertInstance(ctx, in)
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.Version)
	assert.False(t, got.CreatedAt.Before(before.Add(-time.Second)))
	assert.Equal(t, got.CreatedAt, got.UpdatedAt)
	assert.Equal(t, in.Secrets, got.Secrets)
	assert.JSONEq(t, string(in.Parameters), string(got.Parameters))

	_, err = is.InsertInstance(ctx, in)
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)

	read, err := is.GetInstance(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, got, read)

	_, err = is.GetInstance(ctx, "nope")
	assert.ErrorIs(t, err, storage.ErrNotFound)

	read.DashboardURL = "https://new"
	read.Secrets = storage.Secrets{"kubeconfig": "v2", "other": "x"}
	upd, err := is.UpdateInstance(ctx, read)
	require.NoError(t, err)
	assert.EqualValues(t, 2, upd.Version)
	assert.Equal(t, "https://new", upd.DashboardURL)
	assert.Equal(t, got.CreatedAt, upd.CreatedAt)
	assert.False(t, upd.UpdatedAt.Before(got.UpdatedAt))
	read2, err := is.GetInstance(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, upd, read2)

	missing := newInstance("missing")
	missing.Version = 1
	_, err = is.UpdateInstance(ctx, missing)
	assert.ErrorIs(t, err, storage.ErrNotFound)

	// Caller-provided CreatedAt is kept; no secrets round-trips as nil.
	created := time.Date(2020, 5, 6, 7, 8, 9, 123456789, time.UTC)
	in2 := newInstance("i2")
	in2.CreatedAt = created
	in2.Parameters = nil
	got2, err := is.InsertInstance(ctx, in2)
	require.NoError(t, err)
	assert.Equal(t, created.Truncate(time.Microsecond), got2.CreatedAt)
	assert.Nil(t, got2.Secrets)
	assert.Nil(t, got2.Parameters)
	assert.Nil(t, rawSecrets(t, e.s, "instances", "instance_id", "i2"))

	require.NoError(t, is.DeleteInstance(ctx, "i1"))
	_, err = is.GetInstance(ctx, "i1")
	assert.ErrorIs(t, err, storage.ErrNotFound)
	assert.ErrorIs(t, is.DeleteInstance(ctx, "i1"), storage.ErrNotFound)
}

func testInstanceSecretsEncrypted(t *testing.T, e *env) {
	in := newInstance("sec")
	in.Secrets = storage.Secrets{"kubeconfig": "PLAINTEXT-KUBECONFIG-VALUE", "client_secret": "PLAINTEXT-CLIENT-SECRET"}
	_, err := e.s.Instances().InsertInstance(ctx, in)
	require.NoError(t, err)
	raw := rawSecrets(t, e.s, "instances", "instance_id", "sec")
	require.NotEmpty(t, raw)
	for _, plain := range []string{"PLAINTEXT-KUBECONFIG-VALUE", "PLAINTEXT-CLIENT-SECRET", "kubeconfig", "client_secret"} {
		assert.False(t, bytes.Contains(raw, []byte(plain)), "raw secrets column contains %q", plain)
	}
}

func testOperationSecretsEncrypted(t *testing.T, e *env) {
	op := newOp("op-sec", "i", "provision", storage.StatePending, ptr(now()))
	op.Secrets = storage.Secrets{"sm": "PLAINTEXT-SM-CREDENTIALS"}
	mustInsertOp(t, e.s, op)
	raw := rawSecrets(t, e.s, "operations", "id", "op-sec")
	require.NotEmpty(t, raw)
	assert.False(t, bytes.Contains(raw, []byte("PLAINTEXT-SM-CREDENTIALS")))
	assert.False(t, bytes.Contains(raw, []byte(`"sm"`)))
	got, err := e.s.Operations().GetOperation(ctx, "op-sec")
	require.NoError(t, err)
	assert.Equal(t, op.Secrets, got.Secrets)
}

func testOperationCRUD(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	op := newOp("op1", "i1", "provision", storage.StateInProgress, ptr(n.Add(time.Minute)))
	op.LeaseOwner = "w1"
	op.LeaseExpiresAt = ptr(n.Add(30 * time.Second))
	op.LastError = "boom"
	op.Secrets = storage.Secrets{"k": "v"}
	op.Progress = storage.Progress{
		FinishedStages:          []string{"a"},
		StageStartedAt:          map[string]time.Time{"a": n},
		Steps:                   map[string]storage.StepProgress{"s1": {FirstAttempt: n, Attempts: 2, Done: true}},
		ExecutedButNotCompleted: []string{"s2"},
	}
	got, err := ops.InsertOperation(ctx, op)
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.Version)
	assert.False(t, got.CreatedAt.IsZero())
	want := op
	want.Version, want.CreatedAt, want.UpdatedAt = 1, got.CreatedAt, got.UpdatedAt
	assertOpEqual(t, want, got)

	_, err = ops.InsertOperation(ctx, op)
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)

	read, err := ops.GetOperation(ctx, "op1")
	require.NoError(t, err)
	assertOpEqual(t, got, read)
	_, err = ops.GetOperation(ctx, "nope")
	assert.ErrorIs(t, err, storage.ErrNotFound)

	read.State = storage.StateSucceeded
	read.DueAt = nil
	read.LeaseOwner = ""
	read.LeaseExpiresAt = nil
	read.Secrets = nil
	read.Data = nil
	read.Deadline = time.Time{}
	upd, err := ops.UpdateOperation(ctx, read)
	require.NoError(t, err)
	assert.EqualValues(t, 2, upd.Version)
	assert.Equal(t, storage.StateSucceeded, upd.State)
	assert.Nil(t, upd.DueAt)
	assert.Empty(t, upd.LeaseOwner)
	assert.Nil(t, upd.LeaseExpiresAt)
	assert.Nil(t, upd.Secrets)
	assert.Nil(t, upd.Data)
	assert.True(t, upd.Deadline.IsZero())
	assert.Equal(t, got.CreatedAt, upd.CreatedAt)
	assert.Nil(t, rawSecrets(t, e.s, "operations", "id", "op1"))

	missing := newOp("missing", "i", "t", storage.StatePending, nil)
	missing.Version = 1
	_, err = ops.UpdateOperation(ctx, missing)
	assert.ErrorIs(t, err, storage.ErrNotFound)
	_, err = ops.SaveProgress(ctx, missing, storage.Save{}, nil)
	assert.ErrorIs(t, err, storage.ErrNotFound)
}

// assertOpEqual compares operations with times compared by instant.
func assertOpEqual(t *testing.T, want, got storage.Operation) {
	t.Helper()
	norm := func(o storage.Operation) string {
		b, _ := json.Marshal(o)
		return string(b)
	}
	assert.JSONEq(t, norm(want), norm(got))
}

func testTimes(t *testing.T, e *env) {
	loc := time.FixedZone("X", 5*3600+1800)
	ts := time.Date(2031, 2, 3, 4, 5, 6, 123456789, loc)
	op := newOp("op-t", "i", "provision", storage.StatePending, &ts)
	op.CreatedAt = ts
	op.Deadline = ts.Add(time.Hour)
	op.LeaseOwner, op.LeaseExpiresAt = "w", ptr(ts.Add(time.Minute))
	got := mustInsertOp(t, e.s, op)
	read, err := e.s.Operations().GetOperation(ctx, "op-t")
	require.NoError(t, err)
	wantUTC := ts.UTC().Truncate(time.Microsecond)
	for _, o := range []storage.Operation{got, read} {
		assert.Equal(t, wantUTC, o.CreatedAt)
		assert.Equal(t, time.UTC, o.CreatedAt.Location())
		assert.Equal(t, wantUTC, *o.DueAt)
		assert.Equal(t, time.UTC, o.DueAt.Location())
		assert.Equal(t, wantUTC.Add(time.Hour), o.Deadline)
		assert.Equal(t, wantUTC.Add(time.Minute), *o.LeaseExpiresAt)
		assert.Equal(t, time.UTC, o.UpdatedAt.Location())
		assert.Equal(t, o.UpdatedAt, o.UpdatedAt.Truncate(time.Microsecond))
	}
	require.NoError(t, e.s.Events().InsertEvents(ctx, storage.Event{OperationID: "op-t", Type: storage.EventStarted, CreatedAt: ts,
		Duration: 1500 * time.Microsecond, Wait: 3 * time.Second}))
	evs, err := e.s.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{"op-t"}})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	assert.Equal(t, wantUTC, evs.Items[0].CreatedAt)
	assert.Equal(t, time.UTC, evs.Items[0].CreatedAt.Location())
	assert.Equal(t, 1500*time.Microsecond, evs.Items[0].Duration)
	assert.Equal(t, 3*time.Second, evs.Items[0].Wait)
}

func testOptimisticLocking(t *testing.T, e *env) {
	ops := e.s.Operations()
	op := mustInsertOp(t, e.s, newOp("op", "i", "provision", storage.StatePending, ptr(now())))
	a, b := op, op
	a.Description = "a"
	b.Description = "b"
	_, err := ops.UpdateOperation(ctx, a)
	require.NoError(t, err)
	_, err = ops.UpdateOperation(ctx, b)
	assert.ErrorIs(t, err, storage.ErrConflict)
	got, err := ops.GetOperation(ctx, "op")
	require.NoError(t, err)
	assert.Equal(t, "a", got.Description, "a stale write must never overwrite")
	assert.EqualValues(t, 2, got.Version)
	_, err = ops.SaveProgress(ctx, b, storage.Save{}, nil)
	assert.ErrorIs(t, err, storage.ErrConflict)

	is := e.s.Instances()
	in, err := is.InsertInstance(ctx, newInstance("i"))
	require.NoError(t, err)
	ia, ib := in, in
	ia.PlanID, ib.PlanID = "pa", "pb"
	_, err = is.UpdateInstance(ctx, ia)
	require.NoError(t, err)
	_, err = is.UpdateInstance(ctx, ib)
	assert.ErrorIs(t, err, storage.ErrConflict)
	gi, err := is.GetInstance(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, "pa", gi.PlanID)
}

func testConcurrentUpdaters(t *testing.T, e *env) {
	op := mustInsertOp(t, e.s, newOp("op", "i", "provision", storage.StatePending, ptr(now())))
	in, err := e.s.Instances().InsertInstance(ctx, newInstance("i"))
	require.NoError(t, err)
	const n = 10
	var wg sync.WaitGroup
	opWins, instWins := make(chan string, n), make(chan string, n)
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := op
			o.Description = fmt.Sprint("writer ", i)
			if _, err := e.s.Operations().UpdateOperation(ctx, o); err == nil {
				opWins <- o.Description
			} else if !errors.Is(err, storage.ErrConflict) {
				errs <- err
			}
			x := in
			x.DashboardURL = fmt.Sprint("writer ", i)
			if _, err := e.s.Instances().UpdateInstance(ctx, x); err == nil {
				instWins <- x.DashboardURL
			} else if !errors.Is(err, storage.ErrConflict) {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(opWins)
	close(instWins)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Len(t, opWins, 1)
	require.Len(t, instWins, 1)
	got, err := e.s.Operations().GetOperation(ctx, "op")
	require.NoError(t, err)
	assert.Equal(t, <-opWins, got.Description)
	assert.EqualValues(t, 2, got.Version)
	gi, err := e.s.Instances().GetInstance(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, <-instWins, gi.DashboardURL)
}

func testListInstances(t *testing.T, e *env) {
	is := e.s.Instances()
	base := now().Add(-time.Hour)
	for i := 0; i < 12; i++ {
		in := newInstance(fmt.Sprintf("i%02d", i))
		in.GlobalAccountID = fmt.Sprint("ga", i%3)
		in.PlanID = fmt.Sprint("plan", i%2)
		in.ProviderRegion = fmt.Sprint("r", i%4)
		in.CreatedAt = base.Add(time.Duration(11-i) * time.Second) // inserted newest first
		_, err := is.InsertInstance(ctx, in)
		require.NoError(t, err)
	}
	ids := func(p storage.Page[storage.Instance]) []string {
		var out []string
		for _, in := range p.Items {
			out = append(out, in.InstanceID)
		}
		return out
	}
	all, err := is.ListInstances(ctx, storage.InstanceFilter{})
	require.NoError(t, err)
	assert.Equal(t, 12, all.TotalCount)
	require.Len(t, all.Items, 12)
	assert.Equal(t, "i11", all.Items[0].InstanceID, "oldest first")
	assert.Equal(t, "i00", all.Items[11].InstanceID)

	for name, tc := range map[string]struct {
		f    storage.InstanceFilter
		want []string
	}{
		"instance IDs":    {storage.InstanceFilter{InstanceIDs: []string{"i01", "i05", "zz"}}, []string{"i05", "i01"}},
		"runtime IDs":     {storage.InstanceFilter{RuntimeIDs: []string{"rt-i03"}}, []string{"i03"}},
		"global accounts": {storage.InstanceFilter{GlobalAccountIDs: []string{"ga1"}}, []string{"i10", "i07", "i04", "i01"}},
		"sub accounts":    {storage.InstanceFilter{SubAccountIDs: []string{"sa-i02", "sa-i08"}}, []string{"i08", "i02"}},
		"plans":           {storage.InstanceFilter{PlanIDs: []string{"plan1"}, GlobalAccountIDs: []string{"ga0"}}, []string{"i09", "i03"}},
		"regions":         {storage.InstanceFilter{Regions: []string{"r3"}}, []string{"i11", "i07", "i03"}},
		"none":            {storage.InstanceFilter{Regions: []string{"nowhere"}}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := is.ListInstances(ctx, tc.f)
			require.NoError(t, err)
			assert.Equal(t, tc.want, ids(p))
			assert.Equal(t, len(tc.want), p.TotalCount)
		})
	}

	p2, err := is.ListInstances(ctx, storage.InstanceFilter{Paging: storage.Paging{Page: 2, PageSize: 5}})
	require.NoError(t, err)
	assert.Equal(t, 12, p2.TotalCount)
	assert.Equal(t, []string{"i06", "i05", "i04", "i03", "i02"}, ids(p2))
	p3, err := is.ListInstances(ctx, storage.InstanceFilter{Paging: storage.Paging{Page: 3, PageSize: 5}})
	require.NoError(t, err)
	assert.Equal(t, []string{"i01", "i00"}, ids(p3))
	assert.Equal(t, 12, p3.TotalCount, "a short last page")
	p4, err := is.ListInstances(ctx, storage.InstanceFilter{GlobalAccountIDs: []string{"ga1"}, Paging: storage.Paging{Page: 9, PageSize: 5}})
	require.NoError(t, err)
	assert.Empty(t, p4.Items)
	assert.Equal(t, 4, p4.TotalCount)
}

func testListOperations(t *testing.T, e *env) {
	ops := e.s.Operations()
	base := now().Add(-time.Hour)
	states := []storage.OperationState{storage.StatePending, storage.StateInProgress, storage.StateSucceeded, storage.StateFailed}
	for i := 0; i < 12; i++ {
		op := newOp(fmt.Sprintf("op%02d", i), fmt.Sprint("i", i%3), []string{"provision", "deprovision"}[i%2], states[i%4], nil)
		op.CreatedAt = base.Add(time.Duration(i) * time.Second)
		mustInsertOp(t, e.s, op)
	}
	ids := func(p storage.Page[storage.Operation]) []string {
		var out []string
		for _, o := range p.Items {
			out = append(out, o.ID)
		}
		return out
	}
	all, err := ops.ListOperations(ctx, storage.OperationFilter{})
	require.NoError(t, err)
	assert.Equal(t, 12, all.TotalCount)
	require.Len(t, all.Items, 12)
	assert.Equal(t, "op11", all.Items[0].ID, "newest first")
	for name, tc := range map[string]struct {
		f    storage.OperationFilter
		want []string
	}{
		"ids":       {storage.OperationFilter{IDs: []string{"op00", "op04", "x"}}, []string{"op04", "op00"}},
		"instances": {storage.OperationFilter{InstanceIDs: []string{"i2"}}, []string{"op11", "op08", "op05", "op02"}},
		"types":     {storage.OperationFilter{Types: []string{"deprovision"}, InstanceIDs: []string{"i0"}}, []string{"op09", "op03"}},
		"states":    {storage.OperationFilter{States: []storage.OperationState{storage.StateFailed, storage.StatePending}}, []string{"op11", "op08", "op07", "op04", "op03", "op00"}},
		"none":      {storage.OperationFilter{Types: []string{"upgrade"}}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := ops.ListOperations(ctx, tc.f)
			require.NoError(t, err)
			assert.Equal(t, tc.want, ids(p))
			assert.Equal(t, len(tc.want), p.TotalCount)
		})
	}
	p, err := ops.ListOperations(ctx, storage.OperationFilter{Paging: storage.Paging{Page: 2, PageSize: 4}})
	require.NoError(t, err)
	assert.Equal(t, []string{"op07", "op06", "op05", "op04"}, ids(p))
	assert.Equal(t, 12, p.TotalCount)
	// The total stays right whether or not the page tells it: a full last page, past the end.
	for page, want := range map[int][]string{3: {"op03", "op02", "op01", "op00"}, 4: nil} {
		p, err := ops.ListOperations(ctx, storage.OperationFilter{Paging: storage.Paging{Page: page, PageSize: 4}})
		require.NoError(t, err)
		assert.Equal(t, want, ids(p), "page %d", page)
		assert.Equal(t, 12, p.TotalCount, "page %d", page)
	}
	newest, err := ops.ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{"i1"}, Paging: storage.Paging{PageSize: 1, WithoutTotal: true}})
	require.NoError(t, err)
	assert.Equal(t, []string{"op10"}, ids(newest))
	assert.Equal(t, storage.UnknownTotal, newest.TotalCount, "not counted")
	short, err := ops.ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{"i1"}, Paging: storage.Paging{PageSize: 10, WithoutTotal: true}})
	require.NoError(t, err)
	assert.Equal(t, 4, short.TotalCount, "a short page tells the total anyway")
}

func testEvents(t *testing.T, e *env) {
	ev := e.s.Events()
	// An event's instance is its operation's: op0 and op2 are i0's, op1 is i1's.
	for i := 0; i < 3; i++ {
		mustInsertOp(t, e.s, newOp(fmt.Sprint("op", i), fmt.Sprint("i", i%2), "provision", storage.StatePending, nil))
	}
	var in []storage.Event
	for i := 0; i < 7; i++ {
		in = append(in, storage.Event{OperationID: fmt.Sprint("op", i%3), InstanceID: fmt.Sprint("i", i%3%2),
			Step: fmt.Sprint("step", i), Type: storage.EventSucceeded, Message: fmt.Sprint("m", i),
			Duration: time.Duration(i) * time.Millisecond, Wait: time.Duration(i) * time.Second})
	}
	require.NoError(t, ev.InsertEvents(ctx, in[:3]...))
	require.NoError(t, ev.InsertEvents(ctx, in[3:]...))
	require.NoError(t, ev.InsertEvents(ctx))
	all, err := ev.ListEvents(ctx, storage.EventFilter{})
	require.NoError(t, err)
	require.Len(t, all.Items, 7)
	assert.Equal(t, 7, all.TotalCount)
	for i, got := range all.Items {
		assert.Equal(t, in[i].Step, got.Step, "ordered by id")
		assert.Equal(t, in[i].Message, got.Message)
		assert.Equal(t, in[i].Duration, got.Duration)
		assert.Equal(t, in[i].Wait, got.Wait)
		assert.Equal(t, in[i].Type, got.Type)
		assert.False(t, got.CreatedAt.IsZero())
		if i > 0 {
			assert.Greater(t, got.ID, all.Items[i-1].ID)
		}
	}
	steps := func(p storage.Page[storage.Event]) []string {
		var out []string
		for _, e := range p.Items {
			out = append(out, e.Step)
		}
		return out
	}
	p, err := ev.ListEvents(ctx, storage.EventFilter{OperationIDs: []string{"op1"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"step1", "step4"}, steps(p))
	p, err = ev.ListEvents(ctx, storage.EventFilter{InstanceIDs: []string{"i0"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"step0", "step2", "step3", "step5", "step6"}, steps(p), "the events of all the instance's operations")
	assert.Equal(t, 5, p.TotalCount)
	p, err = ev.ListEvents(ctx, storage.EventFilter{InstanceIDs: []string{"i1", "nobody"}, Descending: true, Paging: storage.Paging{PageSize: 1}})
	require.NoError(t, err)
	assert.Equal(t, []string{"step4"}, steps(p))
	p, err = ev.ListEvents(ctx, storage.EventFilter{InstanceIDs: []string{"i0"}, OperationIDs: []string{"op0"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"step0", "step3", "step6"}, steps(p))
	p, err = ev.ListEvents(ctx, storage.EventFilter{InstanceIDs: []string{"i1"}, OperationIDs: []string{"op0"}})
	require.NoError(t, err)
	assert.Empty(t, p.Items)
	p, err = ev.ListEvents(ctx, storage.EventFilter{Paging: storage.Paging{Page: 2, PageSize: 3}})
	require.NoError(t, err)
	assert.Equal(t, []string{"step3", "step4", "step5"}, steps(p))
	assert.Equal(t, 7, p.TotalCount)

	// A batch larger than one INSERT statement.
	many := make([]storage.Event, 1234)
	for i := range many {
		many[i] = storage.Event{OperationID: "bulk", Type: storage.EventStarted, Step: fmt.Sprint(i)}
	}
	require.NoError(t, ev.InsertEvents(ctx, many...))
	p, err = ev.ListEvents(ctx, storage.EventFilter{OperationIDs: []string{"bulk"}, Paging: storage.Paging{PageSize: 1000, Page: 2}})
	require.NoError(t, err)
	assert.Equal(t, 1234, p.TotalCount)
	require.Len(t, p.Items, 234)
	assert.Equal(t, "1000", p.Items[0].Step)
}

func testBadPaging(t *testing.T, e *env) {
	for _, pg := range []storage.Paging{{Page: -1}, {PageSize: -5}, {PageSize: 1001}} {
		_, err := e.s.Instances().ListInstances(ctx, storage.InstanceFilter{Paging: pg})
		assert.Error(t, err)
		_, err = e.s.Operations().ListOperations(ctx, storage.OperationFilter{Paging: pg})
		assert.Error(t, err)
		_, err = e.s.Events().ListEvents(ctx, storage.EventFilter{Paging: pg})
		require.Error(t, err)
		if pg.Page != 0 {
			assert.Contains(t, err.Error(), "Page")
		} else {
			assert.Contains(t, err.Error(), "PageSize")
		}
	}
	_, err := e.s.Events().ListEvents(ctx, storage.EventFilter{Paging: storage.Paging{PageSize: 1000}})
	assert.NoError(t, err)
}

func claimIDs(ops []storage.Operation) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = o.ID
	}
	return out
}

func testClaim(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	mustInsertOp(t, e.s, newOp("due2", "i", "provision", storage.StatePending, ptr(n.Add(-1*time.Second))))
	mustInsertOp(t, e.s, newOp("due1", "i", "provision", storage.StateInProgress, ptr(n.Add(-2*time.Second))))
	mustInsertOp(t, e.s, newOp("due-now", "i", "deprovision", storage.StatePending, ptr(n)))
	mustInsertOp(t, e.s, newOp("later", "i", "provision", storage.StatePending, ptr(n.Add(time.Minute))))
	mustInsertOp(t, e.s, newOp("no-due", "i", "provision", storage.StatePending, nil))
	mustInsertOp(t, e.s, newOp("done", "i", "provision", storage.StateSucceeded, ptr(n.Add(-time.Hour))))
	mustInsertOp(t, e.s, newOp("failed", "i", "provision", storage.StateFailed, ptr(n.Add(-time.Hour))))
	held := newOp("held", "i", "provision", storage.StatePending, ptr(n.Add(-time.Hour)))
	held.LeaseOwner, held.LeaseExpiresAt = "other", ptr(n.Add(time.Minute))
	mustInsertOp(t, e.s, held)
	expired := newOp("expired", "i", "provision", storage.StateInProgress, ptr(n.Add(-time.Minute)))
	expired.LeaseOwner, expired.LeaseExpiresAt = "dead", ptr(n.Add(-time.Second))
	mustInsertOp(t, e.s, expired)

	_, err := ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w", Now: n, LeaseUntil: n.Add(time.Minute), Limit: 0})
	assert.Error(t, err)

	got, err := ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w1", Types: []string{"provision"}, Now: n, LeaseUntil: n.Add(time.Minute), Limit: 2})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"expired", "due1"}, claimIDs(got), "earliest due first, limit")
	for _, o := range got {
		assert.Equal(t, "w1", o.LeaseOwner)
		assert.Equal(t, n.Add(time.Minute), *o.LeaseExpiresAt)
		assert.EqualValues(t, 2, o.Version, "claiming bumps the version")
		assert.NotEqual(t, storage.StateSucceeded, o.State)
	}
	got, err = ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w2", Now: n, LeaseUntil: n.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"due2", "due-now"}, claimIDs(got))
	for _, o := range got {
		assert.Equal(t, storage.StatePending, o.State, "claiming does not change state")
	}

	got, err = ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w3", Now: n, LeaseUntil: n.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, got)

	// Own: a restarted owner takes back what it leases, under a live lease and not due, and
	// nothing else.
	got, err = ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "other", Now: n, LeaseUntil: n.Add(time.Minute), Limit: 10, Own: true})
	require.NoError(t, err)
	require.Equal(t, []string{"held"}, claimIDs(got))
	assert.Equal(t, n.Add(time.Minute), *got[0].LeaseExpiresAt)
	assert.EqualValues(t, 2, got[0].Version, "claiming back bumps the version")
	got, err = ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w1", Types: []string{"deprovision"}, Now: n, LeaseUntil: n.Add(time.Minute), Limit: 10, Own: true})
	require.NoError(t, err)
	assert.Empty(t, got, "of the owner's types only")

	// Only operations created at or after a time (APP_ENQUEUE_IN_PROGRESS_OPERATIONS=false).
	old := newOp("old", "i", "upgrade", storage.StatePending, ptr(n))
	old.CreatedAt = n.Add(-time.Hour)
	mustInsertOp(t, e.s, old)
	fresh := newOp("fresh", "i", "upgrade", storage.StatePending, ptr(n))
	fresh.CreatedAt = n
	mustInsertOp(t, e.s, fresh)
	got, err = ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w4", Types: []string{"upgrade"}, Now: n, LeaseUntil: n.Add(time.Minute), Limit: 10, CreatedAfter: n.Add(-time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, []string{"fresh"}, claimIDs(got))

	// Later, when the leases have expired and "later" is due.
	n2 := n.Add(2 * time.Minute)
	got, err = ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w3", Types: []string{"provision"}, Now: n2, LeaseUntil: n2.Add(time.Minute), Limit: 10})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"held", "expired", "due1", "due2", "later"}, claimIDs(got))
}

func testClaimConcurrent(t *testing.T, e *env) {
	n := now()
	const total = 200
	for i := 0; i < total; i++ {
		mustInsertOp(t, e.s, newOp(fmt.Sprintf("op%03d", i), "i", "provision", storage.StatePending, ptr(n.Add(-time.Duration(i)*time.Millisecond))))
	}
	var (
		mu   sync.Mutex
		seen = map[string]string{}
		wg   sync.WaitGroup
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			owner := fmt.Sprint("w", w)
			for {
				got, err := e.s.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: owner, Now: n, LeaseUntil: n.Add(time.Hour), Limit: 7})
				if !assert.NoError(t, err) {
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, o := range got {
					if prev, dup := seen[o.ID]; dup {
						t.Errorf("%s claimed by %s and %s", o.ID, prev, owner)
					}
					seen[o.ID] = owner
					assert.Equal(t, owner, o.LeaseOwner)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	assert.Len(t, seen, total)
	page, err := e.s.Operations().ListOperations(ctx, storage.OperationFilter{Paging: storage.Paging{PageSize: 1000}})
	require.NoError(t, err)
	for _, o := range page.Items {
		assert.Equal(t, seen[o.ID], o.LeaseOwner, o.ID)
		assert.EqualValues(t, 2, o.Version, o.ID)
	}
}

func claimOne(t *testing.T, s storage.Store, owner string, n time.Time) storage.Operation {
	t.Helper()
	got, err := s.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: owner, Now: n, LeaseUntil: n.Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

func testSaveProgress(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	mustInsertOp(t, e.s, newOp("op", "inst", "provision", storage.StatePending, ptr(n)))
	op := claimOne(t, e.s, "w1", n)

	op.State = storage.StateInProgress
	op.Stage = "create_runtime"
	op.Description = "creating"
	op.DueAt = ptr(n.Add(10 * time.Second))
	op.Progress.Steps = map[string]storage.StepProgress{"s1": {FirstAttempt: n, Attempts: 1, Done: true}}
	op.Progress.FinishedStages = []string{"start"}
	op.Secrets = storage.Secrets{"kubeconfig": "kc"}
	op.Data = json.RawMessage(`{"x":1}`)
	events := []storage.Event{
		{Step: "s1", Type: storage.EventStarted},
		{Step: "s1", Type: storage.EventSucceeded, Duration: 5 * time.Millisecond},
		{Step: "s2", Type: storage.EventRetrying, Message: "retry in 10s", Wait: 10 * time.Second, OperationID: "op", InstanceID: "inst", CreatedAt: n},
	}
	saved, err := ops.SaveProgress(ctx, op, storage.Save{}, events)
	require.NoError(t, err)
	assert.EqualValues(t, op.Version+1, saved.Version)
	assert.Equal(t, "w1", saved.LeaseOwner, "lease kept")
	assert.Equal(t, "create_runtime", saved.Stage)
	assert.Equal(t, storage.StateInProgress, saved.State)
	assert.Equal(t, n.Add(10*time.Second), *saved.DueAt)
	assert.True(t, saved.Progress.StageFinished("start"))
	assert.True(t, saved.Progress.Steps["s1"].Done)
	assert.Equal(t, storage.Secrets{"kubeconfig": "kc"}, saved.Secrets)
	assert.JSONEq(t, `{"x":1}`, string(saved.Data))
	read, err := ops.GetOperation(ctx, "op")
	require.NoError(t, err)
	assertOpEqual(t, saved, read)

	evs, err := e.s.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{"op"}})
	require.NoError(t, err)
	require.Len(t, evs.Items, 3)
	assert.Equal(t, "inst", evs.Items[0].InstanceID, "instance defaults to the operation's")
	assert.Equal(t, storage.EventSucceeded, evs.Items[1].Type)
	assert.Equal(t, 5*time.Millisecond, evs.Items[1].Duration)
	assert.Equal(t, 10*time.Second, evs.Items[2].Wait)
	assert.Equal(t, n, evs.Items[2].CreatedAt)

	// Saving with no events works too.
	saved.Description = "again"
	saved2, err := ops.SaveProgress(ctx, saved, storage.Save{}, nil)
	require.NoError(t, err)
	assert.Equal(t, "again", saved2.Description)

	// A different lease owner is a conflict, even with the current version.
	other := saved2
	other.LeaseOwner = "w2"
	_, err = ops.SaveProgress(ctx, other, storage.Save{}, []storage.Event{{Step: "x", Type: storage.EventStarted}})
	assert.ErrorIs(t, err, storage.ErrConflict)

	// After another worker reclaims the expired lease, the old owner's write is a conflict.
	later := n.Add(time.Hour)
	stolen := claimOne(t, e.s, "w2", later)
	assert.Equal(t, "w2", stolen.LeaseOwner)
	_, err = ops.SaveProgress(ctx, saved2, storage.Save{}, []storage.Event{{Step: "x", Type: storage.EventStarted}})
	assert.ErrorIs(t, err, storage.ErrConflict)
	evs, err = e.s.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{"op"}})
	require.NoError(t, err)
	assert.Len(t, evs.Items, 3, "conflicting saves write no events")

	// ExtendLeases does not bump the version; a save carrying the older expiry keeps the later one.
	held, err := ops.ExtendLeases(ctx, "w2", []string{"op"}, later.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []string{"op"}, held)
	stolen.Description = "by w2"
	saved3, err := ops.SaveProgress(ctx, stolen, storage.Save{}, nil)
	require.NoError(t, err)
	assert.Equal(t, later.Add(time.Hour), *saved3.LeaseExpiresAt, "lease expiry never moves backwards")
	// ...and a save carrying a later expiry moves it.
	saved3.LeaseExpiresAt = ptr(later.Add(2 * time.Hour))
	saved4, err := ops.SaveProgress(ctx, saved3, storage.Save{}, nil)
	require.NoError(t, err)
	assert.Equal(t, later.Add(2*time.Hour), *saved4.LeaseExpiresAt)
}

// testSaveProgressKept: a save leaves the payload columns its Save.Kept names as the row holds
// them (whatever op carries) and writes the others, in concurrent saves (which PostgreSQL
// batches) and alone.
func testSaveProgressKept(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	const count = 16
	for i := 0; i < count; i++ {
		op := newOp(fmt.Sprint("op", i), "inst", "provision", storage.StatePending, ptr(n))
		op.Data, op.Secrets = json.RawMessage(`{"v":"stored"}`), storage.Secrets{"k": "stored"}
		mustInsertOp(t, e.s, op)
	}
	claimed, err := ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w", Now: n, LeaseUntil: n.Add(time.Minute), Limit: count})
	require.NoError(t, err)
	require.Len(t, claimed, count)
	kinds := []storage.Kept{0, storage.KeepData, storage.KeepSecrets, storage.KeepData | storage.KeepSecrets}
	saved := make([]storage.Operation, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i, op := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kept := kinds[i%len(kinds)]
			op.Data, op.Secrets = json.RawMessage(`{"v":"new"}`), storage.Secrets{"k": "new"}
			op.Description = "saved"
			saved[i], errs[i] = ops.SaveProgress(ctx, op, storage.Save{Kept: kept}, []storage.Event{{Step: "s", Type: storage.EventSucceeded}})
		}()
	}
	wg.Wait()
	check := func(op storage.Operation, kept storage.Kept, data, secret string) {
		t.Helper()
		read, err := ops.GetOperation(ctx, op.ID)
		require.NoError(t, err)
		assert.Equal(t, op.Version, read.Version)
		assert.Equal(t, "saved", read.Description, "the other columns are written")
		assert.JSONEq(t, `{"v":"`+data+`"}`, string(read.Data), "data of %s (kept %d)", op.ID, kept)
		assert.Equal(t, storage.Secrets{"k": secret}, read.Secrets, "secrets of %s (kept %d)", op.ID, kept)
	}
	for i := range claimed {
		require.NoError(t, errs[i])
		kept := kinds[i%len(kinds)]
		data, secret := "new", "new"
		if kept&storage.KeepData != 0 {
			data = "stored"
		}
		if kept&storage.KeepSecrets != 0 {
			secret = "stored"
		}
		check(saved[i], kept, data, secret)
	}
	// Alone: the unkept op0 now holds "new"; a save keeping both leaves them, whatever it carries.
	op := saved[0]
	keepBoth := storage.KeepData | storage.KeepSecrets
	op.Data, op.Secrets = json.RawMessage(`{"v":"ignored"}`), nil
	again, err := ops.SaveProgress(ctx, op, storage.Save{Kept: keepBoth}, nil)
	require.NoError(t, err)
	check(again, keepBoth, "new", "new")
}

func testSaveProgressConflict(t *testing.T, e *env) {
	n := now()
	mustInsertOp(t, e.s, newOp("op", "inst", "provision", storage.StatePending, ptr(n)))
	op := claimOne(t, e.s, "w", n)
	const writers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := op
			o.Description = fmt.Sprint(i)
			_, err := e.s.Operations().SaveProgress(ctx, o, storage.Save{}, []storage.Event{
				{Step: fmt.Sprint("w", i), Type: storage.EventStarted},
				{Step: fmt.Sprint("w", i), Type: storage.EventSucceeded},
			})
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
				return
			}
			assert.ErrorIs(t, err, storage.ErrConflict)
		}(i)
	}
	wg.Wait()
	assert.Equal(t, 1, wins)
	evs, err := e.s.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{"op"}})
	require.NoError(t, err)
	require.Len(t, evs.Items, 2, "only the winner's events are written")
	assert.Equal(t, evs.Items[0].Step, evs.Items[1].Step)
}

// Many callers saving their own operations at once (batched on PostgreSQL) all succeed, and
// each call's events land on its own operation.
// saveConcurrently saves each operation rounds times, each from its own goroutine; edit changes
// the operation before a save and returns that save's events. Every save must succeed.
func saveConcurrently(t *testing.T, s storage.Store, ops []storage.Operation, rounds int, edit func(op *storage.Operation, round int) []storage.Event) {
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func(op storage.Operation) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				events := edit(&op, r)
				saved, err := s.Operations().SaveProgress(ctx, op, storage.Save{}, events)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, op.Version+1, saved.Version)
				assert.Equal(t, op.Description, saved.Description)
				assert.Equal(t, op.Secrets, saved.Secrets)
				op = saved
			}
		}(op)
	}
	wg.Wait()
}

func testSaveProgressConcurrent(t *testing.T, e *env) {
	n := now()
	const workers, rounds = 16, 15
	for i := 0; i < workers; i++ {
		op := newOp(fmt.Sprint("op", i), fmt.Sprint("inst", i), "provision", storage.StatePending, ptr(n))
		if i%2 == 0 {
			op.Secrets = storage.Secrets{"k": fmt.Sprint("secret", i)}
		}
		if i%3 == 0 {
			op.Data = nil
		}
		mustInsertOp(t, e.s, op)
	}
	claimed, err := e.s.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: "w", Now: n, LeaseUntil: n.Add(time.Hour), Limit: workers})
	require.NoError(t, err)
	require.Len(t, claimed, workers)
	saveConcurrently(t, e.s, claimed, rounds, func(op *storage.Operation, r int) []storage.Event {
		op.Description = fmt.Sprint(op.ID, " round ", r)
		op.Stage = fmt.Sprint("stage", r)
		op.DueAt = ptr(n.Add(time.Duration(r) * time.Second))
		if r == rounds-1 {
			op.State, op.DueAt, op.LeaseOwner, op.Deadline = storage.StateSucceeded, nil, "", time.Time{}
		}
		return []storage.Event{
			{Step: fmt.Sprint(op.ID, "/", r), Type: storage.EventStarted},
			{Step: fmt.Sprint(op.ID, "/", r), Type: storage.EventSucceeded, Duration: time.Duration(r) * time.Millisecond},
		}
	})
	for i, op := range claimed {
		got, err := e.s.Operations().GetOperation(ctx, op.ID)
		require.NoError(t, err)
		assert.Equal(t, op.Version+rounds, got.Version)
		assert.Equal(t, storage.StateSucceeded, got.State)
		assert.Empty(t, got.LeaseOwner)
		assert.Nil(t, got.LeaseExpiresAt)
		assert.Nil(t, got.DueAt)
		assert.True(t, got.Deadline.IsZero())
		assert.Equal(t, fmt.Sprint("stage", rounds-1), got.Stage)
		assert.Equal(t, op.Secrets, got.Secrets, "operation %d", i)
		assert.Equal(t, string(op.Data), string(got.Data))
		evs, err := e.s.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{op.ID}})
		require.NoError(t, err)
		require.Len(t, evs.Items, 2*rounds)
		for j, ev := range evs.Items {
			assert.Equal(t, fmt.Sprint(op.ID, "/", j/2), ev.Step)
			assert.Equal(t, op.InstanceID, ev.InstanceID)
		}
	}
}

func testSaveProgressRelease(t *testing.T, e *env) {
	n := now()
	mustInsertOp(t, e.s, newOp("op", "inst", "provision", storage.StatePending, ptr(n)))
	op := claimOne(t, e.s, "w", n)
	op.State = storage.StateSucceeded
	op.DueAt = nil
	op.LeaseOwner = ""
	saved, err := e.s.Operations().SaveProgress(ctx, op, storage.Save{}, []storage.Event{{Step: "last", Type: storage.EventSucceeded}})
	require.NoError(t, err)
	assert.Empty(t, saved.LeaseOwner)
	assert.Nil(t, saved.LeaseExpiresAt)
	assert.Nil(t, saved.DueAt)
	assert.Equal(t, storage.StateSucceeded, saved.State)
	// Releasing with a stale version is still a conflict.
	_, err = e.s.Operations().SaveProgress(ctx, op, storage.Save{}, nil)
	assert.ErrorIs(t, err, storage.ErrConflict)
}

func testLeases(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	for _, id := range []string{"a", "b", "c"} {
		mustInsertOp(t, e.s, newOp(id, "i", "provision", storage.StatePending, ptr(n)))
	}
	got, err := ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "w1", Now: n, LeaseUntil: n.Add(time.Minute), Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, claimIDs(got))
	assert.Equal(t, n.Add(time.Minute), *got[0].DueAt, "a leased operation is due when its lease expires")
	claimOne(t, e.s, "w2", n) // c
	next, err := ops.NextDueAt(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, n.Add(time.Minute), *next, "held operations are not due before their leases expire")

	held, err := ops.ExtendLeases(ctx, "w1", []string{"a", "b", "c", "zz"}, n.Add(5*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, held)
	held, err = ops.ExtendLeases(ctx, "w1", nil, n.Add(5*time.Minute))
	require.NoError(t, err)
	assert.Empty(t, held)
	a, err := ops.GetOperation(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, n.Add(5*time.Minute), *a.LeaseExpiresAt)
	assert.Equal(t, n.Add(5*time.Minute), *a.DueAt, "due when the extended lease expires")
	assert.EqualValues(t, 2, a.Version, "extending does not bump the version")
	c, err := ops.GetOperation(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, n.Add(time.Minute), *c.LeaseExpiresAt, "other owner's lease untouched")

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake, err := e.s.Wakeups(wctx)
	require.NoError(t, err)
	drain(wake)

	require.NoError(t, ops.ReleaseLeases(ctx, "w1", []string{"a", "c"}, n))
	expectWake(t, wake)
	a, err = ops.GetOperation(ctx, "a")
	require.NoError(t, err)
	assert.Empty(t, a.LeaseOwner)
	assert.Nil(t, a.LeaseExpiresAt)
	assert.Equal(t, n, *a.DueAt, "released operations are due at the given time")
	assert.EqualValues(t, 2, a.Version, "releasing does not bump the version")
	c, err = ops.GetOperation(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, "w2", c.LeaseOwner, "only the owner's leases are released")
	require.NoError(t, ops.ReleaseLeases(ctx, "w1", nil, n))

	// Released operations are claimable again.
	again := claimOne(t, e.s, "w3", n)
	assert.Equal(t, "a", again.ID)
}

func testReclaimLeases(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	for _, id := range []string{"a", "b", "c", "d"} {
		mustInsertOp(t, e.s, newOp(id, "i", "provision", storage.StatePending, ptr(n)))
	}
	_, err := ops.ClaimOperations(ctx, storage.ClaimRequest{Owner: "host@:8080", Now: n, LeaseUntil: n.Add(time.Minute), Limit: 3})
	require.NoError(t, err)
	claimOne(t, e.s, "other", n) // d
	// A finished operation keeps its row untouched.
	c, err := ops.GetOperation(ctx, "c")
	require.NoError(t, err)
	c.State, c.DueAt, c.LeaseOwner, c.LeaseExpiresAt = storage.StateSucceeded, nil, "", nil
	_, err = ops.SaveProgress(ctx, c, storage.Save{}, nil)
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake, err := e.s.Wakeups(wctx)
	require.NoError(t, err)
	// The writes above notify after their commits (PostgreSQL: asynchronously): wait until
	// they are all in before looking for one from the reclaim.
	for quiet := false; !quiet; {
		select {
		case <-wake:
		case <-time.After(300 * time.Millisecond):
			quiet = true
		}
	}
	// b was claimed back (ClaimRequest.Own) and runs: it keeps its lease.
	ids, err := ops.ReclaimLeases(ctx, "host@:8080", n, []string{"b"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, ids)
	b, err := ops.GetOperation(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "host@:8080", b.LeaseOwner, "a kept lease is untouched")
	ids, err = ops.ReclaimLeases(ctx, "host@:8080", n, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, ids)
	select {
	case <-wake:
		t.Error("reclaiming woke the workers: the restarted owner claims its operations itself")
	case <-time.After(300 * time.Millisecond):
	}
	for _, id := range []string{"a", "b"} {
		op, err := ops.GetOperation(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, op.LeaseOwner, id)
		assert.Nil(t, op.LeaseExpiresAt, id)
		assert.Equal(t, n, *op.DueAt, "%s is due at once, not when the old lease expires", id)
		assert.EqualValues(t, 2, op.Version, "reclaiming does not bump the version")
	}
	d, err := ops.GetOperation(ctx, "d")
	require.NoError(t, err)
	assert.Equal(t, "other", d.LeaseOwner, "another owner's lease is untouched")
	ids, err = ops.ReclaimLeases(ctx, "host@:8080", n, nil)
	require.NoError(t, err)
	assert.Empty(t, ids)
	_, err = ops.ReclaimLeases(ctx, "", n, nil)
	assert.Error(t, err, "an empty owner would match released rows")
	again := claimOne(t, e.s, "w", n)
	assert.Equal(t, "a", again.ID)
}

// testLeasesAndSavesNoDeadlock runs lease extensions over many operations while each of them is
// saved concurrently (batched on PostgreSQL): every multi-row writer takes its row locks in one
// order, so no call ever fails with a deadlock.
func testLeasesAndSavesNoDeadlock(t *testing.T, e *env) {
	n := now()
	const count, rounds = 32, 20
	for i := 0; i < count; i++ {
		mustInsertOp(t, e.s, newOp(fmt.Sprintf("op%02d", i), fmt.Sprint("inst", i), "provision", storage.StatePending, ptr(n)))
	}
	claimed, err := e.s.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: "w", Now: n, LeaseUntil: n.Add(time.Hour), Limit: count})
	require.NoError(t, err)
	require.Len(t, claimed, count)
	ids := claimIDs(claimed)
	done := make(chan struct{})
	var extenders sync.WaitGroup
	var extensions int
	for i := 0; i < 2; i++ {
		extenders.Add(1)
		go func(i int) {
			defer extenders.Done()
			for k := 0; ; k++ {
				select {
				case <-done:
					return
				default:
				}
				held, err := e.s.Operations().ExtendLeases(ctx, "w", ids, n.Add(time.Hour+time.Duration(k)*time.Millisecond))
				if !assert.NoError(t, err) {
					return
				}
				assert.Len(t, held, count)
				if i == 0 {
					extensions++
				}
			}
		}(i)
	}
	saveConcurrently(t, e.s, claimed, rounds, func(op *storage.Operation, r int) []storage.Event {
		op.Description = fmt.Sprint("round ", r)
		return []storage.Event{{Step: "s", Type: storage.EventStarted}}
	})
	close(done)
	extenders.Wait()
	t.Logf("%d saves and %d lease extensions ran concurrently", count*rounds, extensions)
	for _, op := range claimed {
		got, err := e.s.Operations().GetOperation(ctx, op.ID)
		require.NoError(t, err)
		assert.Equal(t, op.Version+rounds, got.Version, "every save applied once")
	}
}

func testFailOverdue(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	mk := func(id string, state storage.OperationState, deadline time.Time, owner string, leaseUntil *time.Time) {
		op := newOp(id, "inst-"+id, "provision", state, ptr(n.Add(-time.Minute)))
		op.Deadline = deadline
		op.LeaseOwner, op.LeaseExpiresAt = owner, leaseUntil
		op.Stage = "stage-" + id
		mustInsertOp(t, e.s, op)
	}
	mk("overdue-free", storage.StateInProgress, n.Add(-time.Second), "", nil)
	mk("overdue-expired", storage.StatePending, n.Add(-time.Second), "w", ptr(n.Add(-time.Millisecond)))
	mk("overdue-held", storage.StateInProgress, n.Add(-time.Second), "w", ptr(n.Add(time.Minute)))
	mk("not-due", storage.StateInProgress, n.Add(time.Second), "", nil)
	mk("finished", storage.StateSucceeded, n.Add(-time.Hour), "", nil)
	mk("no-deadline", storage.StateInProgress, time.Time{}, "", nil)
	// overdue-free was waiting in a step that had failed: the verdict names both.
	free, err := ops.GetOperation(ctx, "overdue-free")
	require.NoError(t, err)
	free.Progress.Steps = map[string]storage.StepProgress{
		"Create_Runtime":   {FirstAttempt: n.Add(-time.Hour), Done: true},
		"Register_Runtime": {FirstAttempt: n.Add(-time.Minute), LastError: "Director: registering runtime: HTTP 500"},
	}
	free.LastError = "a later message"
	_, err = ops.UpdateOperation(ctx, free)
	require.NoError(t, err)
	want := map[string]string{
		"overdue-free":    "step Register_Runtime: operation timed out; last error: Director: registering runtime: HTTP 500",
		"overdue-expired": "operation timed out",
	}

	failed, err := ops.FailOverdue(ctx, n, "operation timed out")
	require.NoError(t, err)
	assert.Equal(t, []string{"overdue-expired", "overdue-free"}, claimIDs(failed))
	for _, op := range failed {
		assert.Equal(t, storage.StateFailed, op.State)
		assert.Equal(t, want[op.ID], op.LastError)
		assert.Equal(t, want[op.ID], op.Description)
		assert.Nil(t, op.DueAt)
		assert.Empty(t, op.LeaseOwner)
		assert.Nil(t, op.LeaseExpiresAt)
		assert.EqualValues(t, map[string]int{"overdue-free": 3, "overdue-expired": 2}[op.ID], op.Version)
		read, err := ops.GetOperation(ctx, op.ID)
		require.NoError(t, err)
		assertOpEqual(t, op, read)
		evs, err := e.s.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{op.ID}})
		require.NoError(t, err)
		require.Len(t, evs.Items, 1)
		assert.Equal(t, storage.EventFailed, evs.Items[0].Type)
		assert.Equal(t, want[op.ID], evs.Items[0].Message)
		assert.Equal(t, "inst-"+op.ID, evs.Items[0].InstanceID)
	}
	all, err := e.s.Events().ListEvents(ctx, storage.EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, 2, all.TotalCount)
	again, err := ops.FailOverdue(ctx, n, "operation timed out")
	require.NoError(t, err)
	assert.Empty(t, again)
	held, err := ops.GetOperation(ctx, "overdue-held")
	require.NoError(t, err)
	assert.Equal(t, storage.StateInProgress, held.State)
}

func testNextDueQueueCount(t *testing.T, e *env) {
	ops := e.s.Operations()
	n := now()
	next, err := ops.NextDueAt(ctx, nil)
	require.NoError(t, err)
	assert.Nil(t, next)
	depth, err := ops.QueueDepth(ctx, n)
	require.NoError(t, err)
	assert.Zero(t, depth)
	counts, err := ops.CountOperations(ctx)
	require.NoError(t, err)
	assert.Empty(t, counts)

	mustInsertOp(t, e.s, newOp("p1", "i", "provision", storage.StatePending, ptr(n.Add(-time.Minute))))
	mustInsertOp(t, e.s, newOp("p2", "i", "provision", storage.StateInProgress, ptr(n.Add(time.Minute))))
	mustInsertOp(t, e.s, newOp("p3", "i", "provision", storage.StateSucceeded, ptr(n.Add(-time.Hour))))
	mustInsertOp(t, e.s, newOp("p4", "i", "provision", storage.StateSucceeded, nil))
	mustInsertOp(t, e.s, newOp("d1", "i", "deprovision", storage.StatePending, ptr(n.Add(-2*time.Minute))))
	leased := newOp("d2", "i", "deprovision", storage.StatePending, ptr(n.Add(-3*time.Minute)))
	leased.LeaseOwner, leased.LeaseExpiresAt = "w", ptr(n.Add(time.Minute))
	mustInsertOp(t, e.s, leased)
	mustInsertOp(t, e.s, newOp("u1", "i", "upgrade", storage.StateFailed, ptr(n.Add(-time.Hour))))

	next, err = ops.NextDueAt(ctx, nil)
	require.NoError(t, err)
	require.NotNil(t, next)
	assert.Equal(t, n.Add(-3*time.Minute), *next)
	next, err = ops.NextDueAt(ctx, []string{"provision"})
	require.NoError(t, err)
	require.NotNil(t, next)
	assert.Equal(t, n.Add(-time.Minute), *next)
	next, err = ops.NextDueAt(ctx, []string{"upgrade"})
	require.NoError(t, err)
	assert.Nil(t, next)

	depth, err = ops.QueueDepth(ctx, n)
	require.NoError(t, err)
	assert.Equal(t, 2, depth, "p1 and d1: due, active, not leased")
	depth, err = ops.QueueDepth(ctx, n.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 4, depth, "p2 due and d2's lease expired")

	counts, err = ops.CountOperations(ctx)
	require.NoError(t, err)
	sort.Slice(counts, func(i, j int) bool {
		if counts[i].Type != counts[j].Type {
			return counts[i].Type < counts[j].Type
		}
		return counts[i].State < counts[j].State
	})
	assert.Equal(t, []storage.OperationCount{
		{Type: "deprovision", State: storage.StatePending, Count: 2},
		{Type: "provision", State: storage.StateInProgress, Count: 1},
		{Type: "provision", State: storage.StatePending, Count: 1},
		{Type: "provision", State: storage.StateSucceeded, Count: 2},
		{Type: "upgrade", State: storage.StateFailed, Count: 1},
	}, counts)
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func expectWake(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case _, ok := <-ch:
		require.True(t, ok, "wake-up channel closed")
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up within 5s")
	}
}

func testWakeups(t *testing.T, e *env) {
	wctx, cancel := context.WithCancel(ctx)
	wake, err := e.s.Wakeups(wctx)
	require.NoError(t, err)
	wake2, err := e.s.Wakeups(wctx)
	require.NoError(t, err)
	drain(wake)
	drain(wake2)
	mustInsertOp(t, e.s, newOp("op", "i", "provision", storage.StatePending, ptr(now())))
	expectWake(t, wake)
	expectWake(t, wake2)
	// Signals coalesce: many inserts never block.
	for i := 0; i < 20; i++ {
		mustInsertOp(t, e.s, newOp(fmt.Sprint("more", i), "i", "provision", storage.StatePending, ptr(now())))
	}
	expectWake(t, wake)
	cancel()
	deadline := time.After(5 * time.Second)
	for _, ch := range []<-chan struct{}{wake, wake2} {
		for closed := false; !closed; {
			select {
			case _, ok := <-ch:
				closed = !ok
			case <-deadline:
				t.Fatal("wake-up channel not closed after ctx ended")
			}
		}
	}
}

// WakeupsAcrossStores checks that an insert through one Store wakes another Store's subscriber
// on the same database (PostgreSQL: LISTEN/NOTIFY between replicas).
func WakeupsAcrossStores(t *testing.T, open Opener) {
	key := Key(t)
	a := open(t, Keyring(t, key))
	b := open(t, Keyring(t, key))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake, err := b.Wakeups(wctx)
	require.NoError(t, err)
	drain(wake)
	mustInsertOp(t, a, newOp("op", "i", "provision", storage.StatePending, ptr(now())))
	expectWake(t, wake)

	got, err := a.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: "w", Now: now(), LeaseUntil: now().Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	time.Sleep(100 * time.Millisecond)
	drain(wake)
	require.NoError(t, a.Operations().ReleaseLeases(ctx, "w", []string{"op"}, now()))
	expectWake(t, wake)

	// An instance or a runtime inserted with its first operation (one statement on PostgreSQL;
	// the notification follows it).
	time.Sleep(100 * time.Millisecond)
	drain(wake)
	_, _, err = a.Instances().InsertInstanceWithOperation(ctx, newInstance("wi"), newOp("wi-op", "wi", "provision", storage.StatePending, ptr(now())))
	require.NoError(t, err)
	expectWake(t, wake)
	time.Sleep(100 * time.Millisecond)
	drain(wake)
	_, _, err = a.Runtimes().InsertRuntimeWithOperation(ctx, newRuntime("wr", "t"), newOp("wr-op", "wr", "provisioner_provision", storage.StatePending, ptr(now())))
	require.NoError(t, err)
	expectWake(t, wake)
	wakeAcrossStores(t, a, b)
}

func testMigrationsIdempotent(t *testing.T, e *env) {
	v1, err := e.s.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Positive(t, v1)
	mustInsertOp(t, e.s, newOp("op", "i", "provision", storage.StatePending, ptr(now())))
	s2 := e.open(t, Keyring(t, e.key))
	v2, err := s2.SchemaVersion(ctx)
	require.NoError(t, err)
	assert.Equal(t, v1, v2)
	got, err := s2.Operations().GetOperation(ctx, "op")
	require.NoError(t, err, "data survives reopening")
	assert.Equal(t, "op", got.ID)
}

func testRotateSecrets(t *testing.T, e *env) {
	keyA, keyB := e.key, Key(t)
	in := newInstance("i")
	in.Secrets = storage.Secrets{"kubeconfig": "kc-i"}
	_, err := e.s.Instances().InsertInstance(ctx, in)
	require.NoError(t, err)
	_, err = e.s.Instances().InsertInstance(ctx, newInstance("no-secrets"))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		op := newOp(fmt.Sprint("op", i), "i", "provision", storage.StatePending, ptr(now()))
		op.Secrets = storage.Secrets{"sm": fmt.Sprint("sm-", i)}
		mustInsertOp(t, e.s, op)
	}
	// A runtime's kubeconfig is encrypted apart from its other secrets: both are rotated.
	rt := newRuntime("rt", "tenant-a")
	rt.Secrets = storage.Secrets{storage.KubeconfigSecret: "kc-rt", "admin": "a"}
	_, _, err = e.s.Runtimes().InsertRuntimeWithOperation(ctx, rt, newOp("op-rt", "rt", "provisioner_provision", storage.StatePending, nil))
	require.NoError(t, err)
	n, err := e.s.RotateSecrets(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "everything is under the primary already")

	rotating := e.open(t, Keyring(t, keyB, keyA))
	got, err := rotating.Operations().GetOperation(ctx, "op1")
	require.NoError(t, err, "previous keys still decrypt")
	assert.Equal(t, "sm-1", got.Secrets["sm"])
	// A row written under B before rotation is left alone.
	op := newOp("op-b", "i", "provision", storage.StatePending, nil)
	op.Secrets = storage.Secrets{"sm": "sm-b"}
	mustInsertOp(t, rotating, op)
	n, err = rotating.RotateSecrets(ctx)
	require.NoError(t, err)
	assert.Equal(t, 6, n, "four operations' and instances' secrets, the runtime's secrets and kubeconfig")
	n, err = rotating.RotateSecrets(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	onlyB := e.open(t, Keyring(t, keyB))
	gi, err := onlyB.Instances().GetInstance(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, "kc-i", gi.Secrets["kubeconfig"])
	grt, err := onlyB.Runtimes().GetRuntime(ctx, "rt")
	require.NoError(t, err)
	assert.Equal(t, storage.Secrets{storage.KubeconfigSecret: "kc-rt", "admin": "a"}, grt.Secrets)
	page, err := onlyB.Operations().ListOperations(ctx, storage.OperationFilter{Types: []string{"provision"}})
	require.NoError(t, err)
	assert.Len(t, page.Items, 4)
	for _, o := range page.Items {
		assert.NotEmpty(t, o.Secrets["sm"])
	}

	onlyA := e.open(t, Keyring(t, keyA))
	_, err = onlyA.Instances().GetInstance(ctx, "i")
	require.Error(t, err)
	assert.ErrorIs(t, err, encryption.ErrUnknownKey)
	assert.Contains(t, err.Error(), "not configured")
	assert.Contains(t, err.Error(), "APP_DATABASE_SECRET_KEY")
	gi, err = onlyA.Instances().GetInstance(ctx, "no-secrets")
	require.NoError(t, err, "rows without secrets need no key")
	assert.Nil(t, gi.Secrets)
}

func testWrongKey(t *testing.T, e *env) {
	op := newOp("op", "i", "provision", storage.StatePending, ptr(now()))
	op.Secrets = storage.Secrets{"k": "v"}
	mustInsertOp(t, e.s, op)
	other := e.open(t, Keyring(t, Key(t)))
	_, err := other.Operations().GetOperation(ctx, "op")
	require.Error(t, err)
	assert.ErrorIs(t, err, encryption.ErrUnknownKey)
	assert.Contains(t, err.Error(), "operation op")
	assert.Contains(t, err.Error(), "APP_DATABASE_SECRET_KEYS_PREVIOUS")
	_, err = other.Operations().ListOperations(ctx, storage.OperationFilter{})
	assert.ErrorIs(t, err, encryption.ErrUnknownKey)
	_, err = other.RotateSecrets(ctx)
	assert.ErrorIs(t, err, encryption.ErrUnknownKey)

	// Corrupted ciphertext under the right key is a clear error, never garbage.
	r := e.s.(RawDB)
	raw := rawSecrets(t, e.s, "operations", "id", "op")
	raw[len(raw)-1] ^= 0xff
	_, err = r.DB().ExecContext(ctx, r.DB().Rebind("UPDATE operations SET secrets = ? WHERE id = ?"), raw, "op")
	require.NoError(t, err)
	_, err = e.s.Operations().GetOperation(ctx, "op")
	assert.ErrorIs(t, err, encryption.ErrDecrypt)
	assert.Contains(t, err.Error(), "wrong key or corrupted data")
}
