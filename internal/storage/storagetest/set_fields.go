package storagetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func sp(s string) *string { return &s }

func testSetInstanceFields(t *testing.T, e *env) {
	insts := e.s.Instances()
	in := newInstance("i1")
	in.RuntimeID, in.Secrets = "", storage.Secrets{"sm": "credentials"}
	stored, err := insts.InsertInstance(ctx, in)
	require.NoError(t, err)

	require.NoError(t, insts.SetInstanceFields(ctx, "i1", storage.InstanceFields{RuntimeID: sp("rt-1")}))
	got, err := insts.GetInstance(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, "rt-1", got.RuntimeID)
	assert.Equal(t, stored.Version+1, got.Version)
	assert.Equal(t, "https://dash/i1", got.DashboardURL, "a field not set is left as it is")
	assert.Equal(t, storage.Secrets{"sm": "credentials"}, got.Secrets)
	assert.JSONEq(t, `{"name":"i1"}`, string(got.Parameters))

	require.NoError(t, insts.SetInstanceFields(ctx, "i1", storage.InstanceFields{RuntimeID: sp("rt-1")}))
	again, err := insts.GetInstance(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, got.Version, again.Version, "values the instance already has are not written")

	require.NoError(t, insts.SetInstanceFields(ctx, "i1", storage.InstanceFields{RuntimeID: sp("rt-1"), DashboardURL: sp("https://console.x")}))
	both, err := insts.GetInstance(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, "https://console.x", both.DashboardURL)
	assert.Equal(t, "rt-1", both.RuntimeID)
	assert.Equal(t, got.Version+1, both.Version)

	require.NoError(t, insts.SetInstanceFields(ctx, "i1", storage.InstanceFields{DashboardURL: sp("https://console.x"), ShootName: sp("c-1")}))
	page, err := e.s.Lifecycle().FindRuntimes(ctx, storage.RuntimeQuery{ShootNames: []string{"c-1"}})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "found by the shoot name")
	shoot, err := insts.GetInstance(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, both.Version+1, shoot.Version)
	got = both

	_, err = insts.UpdateInstance(ctx, got)
	assert.ErrorIs(t, err, storage.ErrConflict, "a writer of the version before conflicts")
	require.NoError(t, insts.SetInstanceFields(ctx, "i1", storage.InstanceFields{}))
	assert.ErrorIs(t, insts.SetInstanceFields(ctx, "missing", storage.InstanceFields{RuntimeID: sp("x")}), storage.ErrNotFound)
}

// testSetRuntimeFields: a runtime's fields written in one statement; an ID it has is not written
// again; a kubeconfig replaces the one in its secrets and leaves the others.
func testSetRuntimeFields(t *testing.T, e *env) {
	rts := e.s.Runtimes()
	rt := newRuntime("rt1", "tenant-a")
	rt.Secrets = storage.Secrets{"kubeconfig": "kc"}
	stored, _, err := rts.InsertRuntimeWithOperation(ctx, rt, newOp("op1", "rt1", "provisioner_provision", storage.StatePending, nil))
	require.NoError(t, err)

	require.NoError(t, rts.SetRuntimeFields(ctx, "rt1", storage.RuntimeFields{CompassRuntimeID: sp("compass-1")}))
	got, err := rts.GetRuntime(ctx, "rt1")
	require.NoError(t, err)
	assert.Equal(t, "compass-1", got.CompassRuntimeID)
	assert.Equal(t, stored.Version+1, got.Version)
	assert.Equal(t, storage.Secrets{"kubeconfig": "kc"}, got.Secrets)
	assert.JSONEq(t, string(stored.Config), string(got.Config))

	require.NoError(t, rts.SetRuntimeFields(ctx, "rt1", storage.RuntimeFields{CompassRuntimeID: sp("compass-1")}))
	again, err := rts.GetRuntime(ctx, "rt1")
	require.NoError(t, err)
	assert.Equal(t, got.Version, again.Version, "an ID the runtime already has is not written")
	_, err = rts.UpdateRuntime(ctx, stored)
	assert.ErrorIs(t, err, storage.ErrConflict)
	assert.ErrorIs(t, rts.SetRuntimeFields(ctx, "missing", storage.RuntimeFields{CompassRuntimeID: sp("x")}), storage.ErrNotFound)

	rt2 := newRuntime("rt2", "tenant-a")
	rt2.Secrets = storage.Secrets{"admin": "a"}
	_, _, err = rts.InsertRuntimeWithOperation(ctx, rt2, newOp("op2", "rt2", "provisioner_provision", storage.StatePending, nil))
	require.NoError(t, err)
	for _, kc := range []string{"kc-1", "kc-2"} {
		require.NoError(t, rts.SetRuntimeFields(ctx, "rt2", storage.RuntimeFields{Kubeconfig: sp(kc)}))
		got, err := rts.GetRuntime(ctx, "rt2")
		require.NoError(t, err)
		assert.Equal(t, storage.Secrets{"admin": "a", storage.KubeconfigSecret: kc}, got.Secrets)
	}
}

// testSaveProgressInstanceFields: the instance fields a save carries (Save.Instance) are
// written with it, in its transaction, when the save is written (alone or in a batch of
// concurrent saves), and not when it conflicts; a save without them leaves the instance alone.
func testSaveProgressInstanceFields(t *testing.T, e *env) {
	const n = 12
	ops := make([]storage.Operation, n)
	for i := range n {
		id := fmt.Sprintf("i%d", i)
		in := newInstance(id)
		in.RuntimeID, in.DashboardURL = "", ""
		_, err := e.s.Instances().InsertInstance(ctx, in)
		require.NoError(t, err)
		ops[i] = mustInsertOp(t, e.s, newOp("op-"+id, id, "provision", storage.StateInProgress, nil))
	}
	saveAllAtOnce(t, e, ops, func(i int, with *storage.Save) {
		switch i % 3 {
		case 0:
			with.Instance = &storage.InstanceFields{RuntimeID: sp(fmt.Sprintf("rt-%d", i))}
		case 1:
			with.Instance = &storage.InstanceFields{DashboardURL: sp("https://console.x"), ShootName: sp(fmt.Sprintf("c-%d", i))}
		}
	})
	for i := range n {
		got, err := e.s.Instances().GetInstance(ctx, fmt.Sprintf("i%d", i))
		require.NoError(t, err)
		switch i % 3 {
		case 0:
			assert.Equal(t, fmt.Sprintf("rt-%d", i), got.RuntimeID)
			assert.Empty(t, got.DashboardURL, "a field not set is left as it is")
			assert.Equal(t, int64(2), got.Version)
		case 1:
			assert.Empty(t, got.RuntimeID)
			assert.Equal(t, "https://console.x", got.DashboardURL)
			assert.Equal(t, int64(2), got.Version)
		default:
			assert.Equal(t, int64(1), got.Version, "a save without instance fields leaves the instance")
		}
	}

	// A stale save writes neither the operation nor its instance fields.
	stale := ops[2]
	lost := storage.Save{Instance: &storage.InstanceFields{RuntimeID: sp("lost")}}
	_, err := e.s.Operations().SaveProgress(ctx, stale, lost, nil)
	assert.ErrorIs(t, err, storage.ErrConflict)
	got, err := e.s.Instances().GetInstance(ctx, "i2")
	require.NoError(t, err)
	assert.Empty(t, got.RuntimeID)
	assert.Equal(t, int64(1), got.Version)
}

// testSaveProgressRuntimeFields: Save.Runtime is Save.Instance for the provisioner's
// runtime the operation is of: written with a written save (alone or batched), not with a
// conflicting one; the runtime's other columns stay. A kubeconfig replaces the runtime's
// Secrets[KubeconfigSecret] and leaves its other secrets.
func testSaveProgressRuntimeFields(t *testing.T, e *env) {
	const n = 8
	ops := make([]storage.Operation, n)
	for i := range n {
		rt := newRuntime(fmt.Sprintf("rt%d", i), "tenant-a")
		rt.Secrets = storage.Secrets{storage.KubeconfigSecret: "kc", "admin": "a"}
		var err error
		_, ops[i], err = e.s.Runtimes().InsertRuntimeWithOperation(ctx, rt, newOp(fmt.Sprintf("op%d", i), rt.ID, "provisioner_provision", storage.StateInProgress, nil))
		require.NoError(t, err)
	}
	saveAllAtOnce(t, e, ops, func(i int, with *storage.Save) {
		if i%2 == 0 {
			with.Runtime = with.Runtime.Merge(storage.RuntimeFields{CompassRuntimeID: sp(fmt.Sprintf("compass-%d", i))})
		}
		if i%3 == 0 {
			with.Runtime = with.Runtime.Merge(storage.RuntimeFields{Kubeconfig: sp(fmt.Sprintf("kc-%d", i))})
		}
	})
	for i := range n {
		got, err := e.s.Runtimes().GetRuntime(ctx, fmt.Sprintf("rt%d", i))
		require.NoError(t, err)
		want := storage.Secrets{storage.KubeconfigSecret: "kc", "admin": "a"}
		if i%3 == 0 {
			want[storage.KubeconfigSecret] = fmt.Sprintf("kc-%d", i)
		}
		assert.Equal(t, want, got.Secrets, "runtime %d", i)
		if i%2 == 0 {
			assert.Equal(t, fmt.Sprintf("compass-%d", i), got.CompassRuntimeID)
		} else {
			assert.Empty(t, got.CompassRuntimeID)
		}
		if i%2 == 0 || i%3 == 0 {
			assert.Equal(t, int64(2), got.Version, "runtime %d", i)
		} else {
			assert.Equal(t, int64(1), got.Version, "runtime %d", i)
		}
	}
	stale := ops[1]
	lost := storage.Save{Runtime: &storage.RuntimeFields{CompassRuntimeID: sp("lost"), Kubeconfig: sp("lost")}}
	_, err := e.s.Operations().SaveProgress(ctx, stale, lost, nil)
	assert.ErrorIs(t, err, storage.ErrConflict)
	got, err := e.s.Runtimes().GetRuntime(ctx, "rt1")
	require.NoError(t, err)
	assert.Empty(t, got.CompassRuntimeID)
	assert.Equal(t, "kc", got.Secrets[storage.KubeconfigSecret])

	// The runtime's own writes keep the kubeconfig with the other secrets' changes, and drop it
	// with them.
	got.Secrets["admin"] = "b"
	got, err = e.s.Runtimes().UpdateRuntime(ctx, got)
	require.NoError(t, err)
	assert.Equal(t, storage.Secrets{storage.KubeconfigSecret: "kc", "admin": "b"}, got.Secrets)
	delete(got.Secrets, storage.KubeconfigSecret)
	got, err = e.s.Runtimes().UpdateRuntime(ctx, got)
	require.NoError(t, err)
	assert.Equal(t, storage.Secrets{"admin": "b"}, got.Secrets)
	got.Secrets = nil
	got, err = e.s.Runtimes().UpdateRuntime(ctx, got)
	require.NoError(t, err)
	assert.Empty(t, got.Secrets)
}

// saveAllAtOnce saves every op at once (a store may write them together), each with what set
// gives it, and requires every save to be written.
func saveAllAtOnce(t *testing.T, e *env, ops []storage.Operation, set func(i int, with *storage.Save)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(ops))
	for i := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var with storage.Save
			set(i, &with)
			_, errs[i] = e.s.Operations().SaveProgress(ctx, ops[i], with, nil)
		}()
	}
	wg.Wait()
	for i := range ops {
		require.NoError(t, errs[i], "save %d", i)
	}
}
