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

// race runs n concurrent calls and counts successes and the errors matching want.
func race(t *testing.T, n int, call func(i int) error, want error) (wins, refused int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := call(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, want):
				refused++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}(i)
	}
	wg.Wait()
	return wins, refused
}

func testInsertOperationExclusive(t *testing.T, e *env) {
	_, _, err := e.s.Instances().InsertInstanceWithOperation(ctx, newInstance("ex"), newOp("prov", "ex", "provision", storage.StateInProgress, ptr(now())))
	require.NoError(t, err)
	ins := e.s.Instances()

	_, err = ins.InsertOperationExclusive(ctx, newOp("upd-1", "ex", "update", storage.StatePending, ptr(now())), []string{"provision", "update"})
	var inProgress *storage.InProgressError
	require.ErrorAs(t, err, &inProgress)
	assert.Equal(t, "prov", inProgress.Operation.ID, "the blocking operation is returned")
	assert.ErrorIs(t, err, storage.ErrOperationInProgress)

	_, err = ins.InsertOperationExclusive(ctx, newOp("dep-1", "ex", "deprovision", storage.StatePending, ptr(now())), []string{"deprovision"})
	require.NoError(t, err, "only the blocking types block")
	_, err = ins.InsertOperationExclusive(ctx, newOp("x", "missing", "deprovision", storage.StatePending, nil), []string{"deprovision"})
	assert.ErrorIs(t, err, storage.ErrNotFound)

	_, err = ins.InsertInstance(ctx, newInstance("ex2"))
	require.NoError(t, err)
	wins, refused := race(t, 20, func(i int) error {
		_, err := ins.InsertOperationExclusive(ctx, newOp(fmt.Sprintf("d-%d", i), "ex2", "deprovision", storage.StatePending, ptr(now())), []string{"deprovision"})
		return err
	}, storage.ErrOperationInProgress)
	assert.Equal(t, 1, wins)
	assert.Equal(t, 19, refused)
}

func testInsertUniqueInstance(t *testing.T, e *env) {
	ins := e.s.Instances()
	trial := func(id, ga string) storage.Instance {
		in := newInstance(id)
		in.GlobalAccountID, in.PlanID = ga, "trial"
		return in
	}
	wins, refused := race(t, 20, func(i int) error {
		id := fmt.Sprintf("t-%d", i)
		_, _, err := ins.InsertUniqueInstanceWithOperation(ctx, trial(id, "ga-q"), newOp("op-"+id, id, "provision", storage.StatePending, ptr(now())))
		var quota *storage.QuotaError
		if errors.As(err, &quota) {
			return errQuota
		}
		return err
	}, errQuota)
	assert.Equal(t, 1, wins)
	assert.Equal(t, 19, refused)

	_, _, err := ins.InsertUniqueInstanceWithOperation(ctx, trial("other-ga", "ga-r"), newOp("op-o", "other-ga", "provision", storage.StatePending, nil))
	require.NoError(t, err, "another global account has its own quota")
	_, _, err = ins.InsertUniqueInstanceWithOperation(ctx, trial("other-ga", "ga-r"), newOp("op-o2", "other-ga", "provision", storage.StatePending, nil))
	require.ErrorIs(t, err, storage.ErrAlreadyExists, "the account's own instance again is a repeat, not over the quota")
	// An archived instance frees the quota.
	got, err := ins.GetInstance(ctx, "other-ga")
	require.NoError(t, err)
	got.DeletedAt = ptr(now())
	_, err = ins.UpdateInstance(ctx, got)
	require.NoError(t, err)
	_, _, err = ins.InsertUniqueInstanceWithOperation(ctx, trial("again", "ga-r"), newOp("op-a", "again", "provision", storage.StatePending, nil))
	assert.NoError(t, err)
}

var errQuota = errors.New("quota")
