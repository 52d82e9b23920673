package storagetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func newRuntime(id, tenant string) storage.Runtime {
	return storage.Runtime{ID: id, Tenant: tenant, Name: "rt-" + id, Backend: "simulated", Config: []byte(`{"kymaConfig":{"version":"2.0"}}`)}
}

func testRuntimes(t *testing.T, e *env) {
	rts := e.s.Runtimes()
	rt := newRuntime("rt1", "tenant-a")
	rt.Secrets = storage.Secrets{"kubeconfig": "PLAINTEXT-RUNTIME-KUBECONFIG"}
	op := newOp("op1", "rt1", "provisioner_provision", storage.StatePending, ptr(now()))
	gotRt, gotOp, err := rts.InsertRuntimeWithOperation(ctx, rt, op)
	require.NoError(t, err)
	assert.EqualValues(t, 1, gotRt.Version)
	assert.Equal(t, "rt1", gotOp.InstanceID)
	assert.False(t, bytes.Contains(rawSecrets(t, e.s, "runtimes", "id", "rt1"), []byte("PLAINTEXT")), "runtime secrets are encrypted")

	_, _, err = rts.InsertRuntimeWithOperation(ctx, rt, newOp("op2", "rt1", "provisioner_provision", storage.StatePending, ptr(now())))
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)
	_, err = e.s.Operations().GetOperation(ctx, "op2")
	assert.ErrorIs(t, err, storage.ErrNotFound, "a failed runtime insert inserts no operation")
	_, _, err = rts.InsertRuntimeWithOperation(ctx, newRuntime("rt9", "t"), newOp("op9", "other", "x", storage.StatePending, nil))
	assert.Error(t, err, "the operation must belong to the runtime")

	got, err := rts.GetRuntime(ctx, "rt1")
	require.NoError(t, err)
	assert.Equal(t, "PLAINTEXT-RUNTIME-KUBECONFIG", got.Secrets["kubeconfig"])
	assert.JSONEq(t, `{"kymaConfig":{"version":"2.0"}}`, string(got.Config))

	assert.Empty(t, got.Allocation)

	got.CompassRuntimeID = "compass-1"
	got.Allocation = []byte(`{"host":"http://node-1.localhost","cpu":2}`)
	upd, err := rts.UpdateRuntime(ctx, got)
	require.NoError(t, err)
	assert.EqualValues(t, 2, upd.Version)
	assert.JSONEq(t, `{"host":"http://node-1.localhost","cpu":2}`, string(upd.Allocation), "the allocation is stored with the runtime")
	_, err = rts.UpdateRuntime(ctx, got)
	assert.ErrorIs(t, err, storage.ErrConflict, "stale version")
	_, err = rts.GetRuntime(ctx, "missing")
	assert.ErrorIs(t, err, storage.ErrNotFound)

	_, _, err = rts.InsertRuntimeWithOperation(ctx, newRuntime("rt2", "tenant-b"), newOp("op3", "rt2", "provisioner_provision", storage.StatePending, nil))
	require.NoError(t, err)
	upd.Deleted = true
	_, err = rts.UpdateRuntime(ctx, upd)
	require.NoError(t, err)
	page, err := rts.ListRuntimes(ctx, storage.RuntimeFilter{})
	require.NoError(t, err)
	assert.Equal(t, 1, page.TotalCount, "deleted runtimes are not listed by default")
	page, err = rts.ListRuntimes(ctx, storage.RuntimeFilter{IncludeDeleted: true, Tenants: []string{"tenant-a"}})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, "rt1", page.Items[0].ID)
}

func testRuntimeOperationsOneAtATime(t *testing.T, e *env) {
	rts, ops := e.s.Runtimes(), e.s.Operations()
	first := newOp("first", "rt", "provisioner_provision", storage.StateInProgress, ptr(now()))
	_, _, err := rts.InsertRuntimeWithOperation(ctx, newRuntime("rt", "t"), first)
	require.NoError(t, err)
	_, err = rts.StartRuntimeOperation(ctx, newOp("second", "rt", "provisioner_upgrade_shoot", storage.StatePending, ptr(now())))
	assert.ErrorIs(t, err, storage.ErrOperationInProgress)
	_, err = rts.StartRuntimeOperation(ctx, newOp("x", "nope", "provisioner_deprovision", storage.StatePending, nil))
	assert.ErrorIs(t, err, storage.ErrNotFound)

	f, err := ops.GetOperation(ctx, "first")
	require.NoError(t, err)
	f.State = storage.StateSucceeded
	_, err = ops.UpdateOperation(ctx, f)
	require.NoError(t, err)

	// Ten concurrent starts: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, busy := 0, 0
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := rts.StartRuntimeOperation(ctx, newOp("c"+string(rune('a'+i)), "rt", "provisioner_hibernate", storage.StatePending, ptr(now())))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, storage.ErrOperationInProgress):
				busy++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}(i)
	}
	wg.Wait()
	assert.Equal(t, 1, wins)
	assert.Equal(t, 9, busy)
}
