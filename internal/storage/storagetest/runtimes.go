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

	storedOp, err := e.s.Operations().GetOperation(ctx, "op1")
	require.NoError(t, err)
	assert.Equal(t, storedOp, gotOp, "what the insert returns is what is stored")
	_, _, err = rts.InsertRuntimeWithOperation(ctx, newRuntime("rt-new", "t"), newOp("op1", "rt-new", "provisioner_provision", storage.StatePending, nil))
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)
	_, err = rts.GetRuntime(ctx, "rt-new")
	assert.ErrorIs(t, err, storage.ErrNotFound, "nothing is written when the operation exists")
	_, _, err = rts.InsertRuntimeWithOperation(ctx, newRuntime("rt-new", "t"), newOp("", "rt-new", "provisioner_provision", storage.StatePending, nil))
	assert.ErrorContains(t, err, "operation ID is empty")
	_, err = rts.GetRuntime(ctx, "rt-new")
	assert.ErrorIs(t, err, storage.ErrNotFound, "nothing is written without an operation ID")

	_, _, err = rts.InsertRuntimeWithOperation(ctx, rt, newOp("op2", "rt1", "provisioner_provision", storage.StatePending, ptr(now())))
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)
	_, err = e.s.Operations().GetOperation(ctx, "op2")
	assert.ErrorIs(t, err, storage.ErrNotFound, "a failed runtime insert inserts no operation")
	_, _, err = rts.InsertRuntimeWithOperation(ctx, newRuntime("rt9", "t"), newOp("op9", "other", "x", storage.StatePending, nil))
	assert.Error(t, err, "the operation must belong to the runtime")

	got, err := rts.GetRuntime(ctx, "rt1")
	require.NoError(t, err)
	assert.Equal(t, got, gotRt, "what the insert returns is what is stored")
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

func testRuntimeOperationStatus(t *testing.T, e *env) {
	rts, ops := e.s.Runtimes(), e.s.Operations()
	rt := newRuntime("rt", "tenant-a")
	rt.CompassRuntimeID = "compass-1"
	rt.Secrets = storage.Secrets{"kubeconfig": "kc"}
	prov := newOp("prov", "rt", "provisioner_provision", storage.StateFailed, nil)
	prov.Stage, prov.LastError = "WaitingForClusterCreation", "the cluster failed"
	prov.Data = []byte(`{"runtimeID":"rt","config":{"labels":{"kyma":"label"},"kyma":{"version":"2.0","components":[]}}}`)
	_, _, err := rts.InsertRuntimeWithOperation(ctx, rt, prov)
	require.NoError(t, err)

	got, err := rts.ReadRuntimeOperationStatus(ctx, "prov")
	require.NoError(t, err)
	assert.Equal(t, storage.RuntimeOperationStatus{
		OperationStatus: storage.OperationStatus{ID: "prov", InstanceID: "rt", Type: "provisioner_provision", State: storage.StateFailed,
			Description: "d prov", LastError: "the cluster failed"},
		Stage: "WaitingForClusterCreation", Kyma: true, RuntimeFound: true, Tenant: "tenant-a", CompassRuntimeID: "compass-1",
	}, got)

	for data, kyma := range map[string]bool{`{"config":{}}`: false, `{"config":{"kyma":null}}`: false, `{"kyma":{}}`: false, `{"config":{"kyma":{}}}`: true} {
		op := newOp("op-"+data, "rt", "provisioner_deprovision", storage.StateSucceeded, nil)
		op.Data = []byte(data)
		mustInsertOp(t, e.s, op)
		got, err := rts.ReadRuntimeOperationStatus(ctx, op.ID)
		require.NoError(t, err)
		assert.Equal(t, kyma, got.Kyma, "data %s", data)
		assert.Equal(t, storage.StateSucceeded, got.State)
	}

	cur, err := rts.GetRuntime(ctx, "rt")
	require.NoError(t, err)
	cur.Deleted = true
	_, err = rts.UpdateRuntime(ctx, cur)
	require.NoError(t, err)
	got, err = rts.ReadRuntimeOperationStatus(ctx, "prov")
	require.NoError(t, err)
	assert.True(t, got.Deleted, "a deleted runtime's operations stay readable")

	mustInsertOp(t, e.s, newOp("broker-op", "instance-1", "provision", storage.StateInProgress, nil))
	got, err = rts.ReadRuntimeOperationStatus(ctx, "broker-op")
	require.NoError(t, err)
	assert.False(t, got.RuntimeFound, "an operation of an instance that is no runtime")
	assert.Equal(t, storage.StateInProgress, got.State)

	_, err = rts.ReadRuntimeOperationStatus(ctx, "missing")
	assert.ErrorIs(t, err, storage.ErrNotFound)
	_, err = ops.GetOperation(ctx, "prov")
	require.NoError(t, err)
}
