package storagetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func testReadLastOperation(t *testing.T, e *env) {
	types := []string{"provision", "deprovision"}
	read := func(instanceID, operationID string, types []string) storage.LastOperationRead {
		t.Helper()
		got, err := e.s.Operations().ReadLastOperation(ctx, instanceID, operationID, types)
		require.NoError(t, err)
		return got
	}

	assert.Equal(t, storage.LastOperationRead{}, read("lo-none", "", types), "no instance, nothing named")

	_, err := e.s.Instances().InsertInstance(ctx, newInstance("lo-1"))
	require.NoError(t, err)
	assert.Equal(t, storage.LastOperationRead{InstanceExists: true}, read("lo-1", "", types), "an instance without operations")

	base := now().Add(-time.Hour)
	insert := func(id, instanceID, typ string, state storage.OperationState, at time.Time, description, lastError string) {
		t.Helper()
		op := newOp(id, instanceID, typ, state, nil)
		op.CreatedAt, op.Description, op.LastError = at, description, lastError
		op.Secrets = storage.Secrets{"kubeconfig": "secret"}
		_, err := e.s.Operations().InsertOperation(ctx, op)
		require.NoError(t, err)
	}
	insert("lo-op-1", "lo-1", "provision", storage.StateSucceeded, base, "done", "")
	insert("lo-op-2", "lo-1", "deprovision", storage.StateFailed, base.Add(time.Minute), "failing", "step x: system y answered 500")
	insert("lo-op-3", "lo-1", "upgradeKyma", storage.StateInProgress, base.Add(2*time.Minute), "upgrading", "")
	// Same creation time as lo-op-2: the larger ID is the newer.
	insert("lo-op-2b", "lo-1", "provision", storage.StateInProgress, base.Add(time.Minute), "waiting", "")
	_, err = e.s.Instances().InsertInstance(ctx, newInstance("lo-2"))
	require.NoError(t, err)
	insert("lo-other", "lo-2", "provision", storage.StatePending, base, "queued", "")

	got := read("lo-1", "", types)
	assert.True(t, got.InstanceExists)
	assert.Nil(t, got.Named)
	assert.Equal(t, &storage.OperationStatus{ID: "lo-op-2b", InstanceID: "lo-1", Type: "provision", State: storage.StateInProgress, Description: "waiting"}, got.Newest,
		"the newest of the types; upgradeKyma is not one")

	got = read("lo-1", "lo-op-2", types)
	assert.Equal(t, &storage.OperationStatus{ID: "lo-op-2", InstanceID: "lo-1", Type: "deprovision", State: storage.StateFailed, Description: "failing", LastError: "step x: system y answered 500"}, got.Named)
	assert.Nil(t, got.Newest, "a named operation that exists is the answer; the newest is not read")

	got = read("lo-1", "lo-other", types)
	assert.Equal(t, "lo-2", got.Named.InstanceID, "a named operation of another instance is returned for the caller to refuse")
	assert.True(t, got.InstanceExists, "existence is of the instance asked about")
	got = read("lo-1", "lo-missing", types)
	assert.Nil(t, got.Named)
	assert.True(t, got.InstanceExists)
	assert.Equal(t, "lo-op-2b", got.Newest.ID, "an unknown named operation falls back to the newest")
	got = read("lo-1", "lo-missing", []string{"upgradeKyma"})
	assert.Nil(t, got.Named)
	assert.Equal(t, "lo-op-3", got.Newest.ID, "another number of types is another statement")

	got = read("lo-none", "lo-op-1", types)
	assert.False(t, got.InstanceExists)
	assert.Nil(t, got.Newest)
	assert.Equal(t, "lo-op-1", got.Named.ID)

	// Archived instances keep answering.
	archived, err := e.s.Instances().GetInstance(ctx, "lo-2")
	require.NoError(t, err)
	archived.DeletedAt = ptr(now())
	_, err = e.s.Instances().UpdateInstance(ctx, archived)
	require.NoError(t, err)
	got = read("lo-2", "", types)
	assert.True(t, got.InstanceExists)
	assert.Equal(t, "lo-other", got.Newest.ID)

	// A deleted row is gone.
	require.NoError(t, e.s.Instances().DeleteInstance(ctx, "lo-2"))
	assert.False(t, read("lo-2", "", types).InstanceExists)

	_, err = e.s.Operations().ReadLastOperation(ctx, "lo-1", "", nil)
	assert.Error(t, err, "no types")

	// Concurrent reads (which a store may answer together) each get their own answer.
	const readers = 64
	for i := 0; i < readers; i++ {
		_, err := e.s.Instances().InsertInstance(ctx, newInstance(fmt.Sprintf("lo-c-%d", i)))
		require.NoError(t, err)
		insert(fmt.Sprintf("lo-c-op-%d", i), fmt.Sprintf("lo-c-%d", i), "provision", storage.StateInProgress, base, fmt.Sprintf("step %d", i), "")
	}
	var wg sync.WaitGroup
	errs := make(chan error, readers*10)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			instanceID, opID := fmt.Sprintf("lo-c-%d", i), fmt.Sprintf("lo-c-op-%d", i)
			for j := 0; j < 10; j++ {
				// Every third read names an operation of another instance or none that exists.
				asked := opID
				switch j % 3 {
				case 1:
					asked = fmt.Sprintf("lo-c-op-%d", (i+1)%readers)
				case 2:
					asked = "lo-c-missing"
				}
				got, err := e.s.Operations().ReadLastOperation(ctx, instanceID, asked, types)
				switch {
				case err != nil:
					errs <- err
				case !got.InstanceExists:
					errs <- fmt.Errorf("%s: instance not found", instanceID)
				case j%3 == 2 && (got.Named != nil || got.Newest == nil || got.Newest.ID != opID):
					errs <- fmt.Errorf("%s asking for a missing operation: got %+v", instanceID, got)
				case j%3 != 2 && (got.Named == nil || got.Named.ID != asked || got.Named.Description != fmt.Sprintf("step %d", (i+j%3)%readers)):
					errs <- fmt.Errorf("%s asking for %s: got %+v", instanceID, asked, got.Named)
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
