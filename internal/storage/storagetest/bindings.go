package storagetest

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

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
