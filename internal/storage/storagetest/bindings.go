package storagetest

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testBindings(t *testing.T, e *env) {
	b := storage.Binding{
		ID: "b-1", InstanceID: "i-1", Request: json.RawMessage(`{"plan_id":"p","service_id":"s"}`),
		Credentials: storage.Secrets{"kubeconfig": "PLAINTEXT-BINDING-KUBECONFIG"},
	}
	in, err := e.s.Bindings().InsertBinding(ctx, b)
	require.NoError(t, err)
	assert.False(t, in.CreatedAt.IsZero())

	got, err := e.s.Bindings().GetBinding(ctx, "i-1", "b-1")
	require.NoError(t, err)
	assert.Equal(t, b.Credentials, got.Credentials)
	assert.JSONEq(t, string(b.Request), string(got.Request))
	assert.Equal(t, in.CreatedAt, got.CreatedAt)
	raw := rawSecrets(t, e.s, "bindings", "id", "b-1")
	require.NotEmpty(t, raw)
	assert.False(t, bytes.Contains(raw, []byte("PLAINTEXT-BINDING-KUBECONFIG")), "credentials are encrypted at rest")

	_, err = e.s.Bindings().GetBinding(ctx, "i-other", "b-1")
	assert.ErrorIs(t, err, storage.ErrNotFound, "a binding belongs to its instance")
	_, err = e.s.Bindings().InsertBinding(ctx, b)
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)

	assert.ErrorIs(t, e.s.Bindings().DeleteBinding(ctx, "i-other", "b-1"), storage.ErrNotFound)
	require.NoError(t, e.s.Bindings().DeleteBinding(ctx, "i-1", "b-1"))
	assert.ErrorIs(t, e.s.Bindings().DeleteBinding(ctx, "i-1", "b-1"), storage.ErrNotFound)
	_, err = e.s.Bindings().GetBinding(ctx, "i-1", "b-1")
	assert.ErrorIs(t, err, storage.ErrNotFound)

	// Concurrent inserts of one ID: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.s.Bindings().InsertBinding(ctx, storage.Binding{ID: "b-race", InstanceID: "i-1", Request: json.RawMessage(`{}`)}); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else {
				assert.ErrorIs(t, err, storage.ErrAlreadyExists)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, wins)
}

func testReadForBind(t *testing.T, e *env) {
	const provision = "provision"
	_, err := e.s.Bindings().ReadForBind(ctx, "i-none", "b-1", provision)
	assert.ErrorIs(t, err, storage.ErrNotFound, "no instance")

	in := newInstance("i-1")
	in.Secrets = storage.Secrets{"token": "t"}
	inst, err := e.s.Instances().InsertInstance(ctx, in)
	require.NoError(t, err)
	_, err = e.s.Instances().InsertInstance(ctx, newInstance("i-2"))
	require.NoError(t, err)
	got, err := e.s.Bindings().ReadForBind(ctx, "i-1", "b-1", provision)
	require.NoError(t, err)
	assert.Equal(t, inst, got.Instance, "the instance as GetInstance reads it")
	assert.Nil(t, got.Binding)
	assert.Empty(t, got.LatestState, "no operation of the type")

	// The newest operation of the type counts, not an older one nor a newer one of another type.
	t0 := now().Add(-time.Hour)
	for i, op := range []storage.Operation{
		newOp("op-old", "i-1", provision, storage.StateSucceeded, nil),
		newOp("op-new", "i-1", provision, storage.StateFailed, nil),
		newOp("op-other", "i-1", "update", storage.StateInProgress, nil),
		newOp("op-2", "i-2", provision, storage.StateSucceeded, nil),
	} {
		op.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
		mustInsertOp(t, e.s, op)
	}
	got, err = e.s.Bindings().ReadForBind(ctx, "i-1", "b-1", provision)
	require.NoError(t, err)
	assert.Equal(t, storage.StateFailed, got.LatestState)
	assert.Nil(t, got.Binding)

	b, err := e.s.Bindings().InsertBinding(ctx, storage.Binding{
		ID: "b-1", InstanceID: "i-2", Request: json.RawMessage(`{"plan_id":"p"}`),
		Credentials: storage.Secrets{"kubeconfig": "kc"},
	})
	require.NoError(t, err)
	for _, id := range []string{"i-1", "i-2"} {
		got, err = e.s.Bindings().ReadForBind(ctx, id, "b-1", provision)
		require.NoError(t, err)
		require.NotNil(t, got.Binding, "the binding is found whoever's instance it is (%s)", id)
		assert.Equal(t, id, got.Instance.InstanceID)
		assert.Equal(t, b.ID, got.Binding.ID)
		assert.Equal(t, "i-2", got.Binding.InstanceID)
		assert.JSONEq(t, string(b.Request), string(got.Binding.Request))
		assert.Equal(t, b.Credentials, got.Binding.Credentials)
		assert.Equal(t, b.CreatedAt, got.Binding.CreatedAt)
	}
	assert.Equal(t, storage.StateSucceeded, got.LatestState, "i-2's own operation")

	// A deprovisioned instance is read with its DeletedAt (the broker tells it apart), one
	// removed is not found.
	inst.DeletedAt = ptr(now())
	_, err = e.s.Instances().UpdateInstance(ctx, inst)
	require.NoError(t, err)
	got, err = e.s.Bindings().ReadForBind(ctx, "i-1", "b-1", provision)
	require.NoError(t, err)
	assert.NotNil(t, got.Instance.DeletedAt)
	require.NoError(t, e.s.Instances().DeleteInstance(ctx, "i-1"))
	_, err = e.s.Bindings().ReadForBind(ctx, "i-1", "b-1", provision)
	assert.ErrorIs(t, err, storage.ErrNotFound)
}
