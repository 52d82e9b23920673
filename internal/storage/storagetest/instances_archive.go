package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func testInstanceWithOperation(t *testing.T, e *env) {
	in := newInstance("inst")
	in.Secrets = storage.Secrets{"k": "v"}
	gotIn, op, err := e.s.Instances().InsertInstanceWithOperation(ctx, in, newOp("op-1", "inst", "provision", storage.StatePending, ptr(now())))
	require.NoError(t, err)
	assert.EqualValues(t, 1, op.Version)
	storedIn, err := e.s.Instances().GetInstance(ctx, "inst")
	require.NoError(t, err)
	assert.Equal(t, storedIn, gotIn, "what the insert returns is what is stored")
	storedOp, err := e.s.Operations().GetOperation(ctx, "op-1")
	require.NoError(t, err)
	assert.Equal(t, storedOp, op, "what the insert returns is what is stored")

	_, _, err = e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("new"), newOp("op-1", "new", "provision", storage.StatePending, nil))
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)
	_, err = e.s.Instances().GetInstance(ctx, "new")
	assert.ErrorIs(t, err, storage.ErrNotFound, "nothing is written when the operation exists")
	_, _, err = e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("new"), newOp("", "new", "provision", storage.StatePending, nil))
	assert.ErrorContains(t, err, "operation ID is empty")
	_, err = e.s.Instances().GetInstance(ctx, "new")
	assert.ErrorIs(t, err, storage.ErrNotFound, "nothing is written without an operation ID")

	_, _, err = e.s.Instances().InsertInstanceWithOperation(ctx, in, newOp("op-2", "inst", "provision", storage.StatePending, ptr(now())))
	assert.ErrorIs(t, err, storage.ErrAlreadyExists)
	_, err = e.s.Operations().GetOperation(ctx, "op-2")
	assert.ErrorIs(t, err, storage.ErrNotFound, "nothing is written when the instance exists")
	_, _, err = e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("other"), newOp("op-3", "inst", "provision", storage.StatePending, nil))
	assert.Error(t, err, "the operation must belong to the instance")

	// Twenty concurrent identical requests: one instance, one operation.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, exists := 0, 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, _, err := e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("race"), newOp(fmt.Sprintf("race-%d", i), "race", "provision", storage.StatePending, ptr(now())))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, storage.ErrAlreadyExists):
				exists++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}(i)
	}
	wg.Wait()
	assert.Equal(t, 1, wins)
	assert.Equal(t, 19, exists)
	page, err := e.s.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{"race"}})
	require.NoError(t, err)
	assert.Equal(t, 1, page.TotalCount)
}

func testInstanceArchive(t *testing.T, e *env) {
	in, err := e.s.Instances().InsertInstance(ctx, newInstance("arch"))
	require.NoError(t, err)
	assert.Nil(t, in.DeletedAt)
	_, err = e.s.Instances().InsertInstance(ctx, newInstance("live"))
	require.NoError(t, err)
	in.DeletedAt = ptr(now())
	in, err = e.s.Instances().UpdateInstance(ctx, in)
	require.NoError(t, err)
	require.NotNil(t, in.DeletedAt)

	got, err := e.s.Instances().GetInstance(ctx, "arch")
	require.NoError(t, err, "archived instances stay readable")
	assert.Equal(t, *in.DeletedAt, *got.DeletedAt)
	page, err := e.s.Instances().ListInstances(ctx, storage.InstanceFilter{})
	require.NoError(t, err)
	assert.Equal(t, 1, page.TotalCount, "archived instances are not listed by default")
	page, err = e.s.Instances().ListInstances(ctx, storage.InstanceFilter{IncludeDeleted: true})
	require.NoError(t, err)
	assert.Equal(t, 2, page.TotalCount)
}
