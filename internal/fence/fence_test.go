package fence_test

import (
	"context"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/fence"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestALeaseEndsItsContextUnlessExtended(t *testing.T) {
	ctx, l := fence.New(context.Background(), time.Now().Add(100*time.Millisecond))
	defer l.Stop()
	require.NoError(t, fence.Check(ctx))
	require.True(t, l.Extend(time.Now().Add(400*time.Millisecond)))
	time.Sleep(200 * time.Millisecond) // past the first end
	assert.NoError(t, ctx.Err(), "extended")
	assert.NoError(t, fence.Check(ctx))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end with the lease")
	}
	assert.ErrorIs(t, context.Cause(ctx), fence.ErrExpired)
	assert.ErrorIs(t, fence.Check(ctx), fence.ErrExpired)
	assert.False(t, l.Extend(time.Now().Add(time.Hour)), "an ended lease stays ended")
}

// Check reads the clock: a lease past its end is over even before its timer has fired (a
// process resumed after a pause).
func TestCheckDoesNotWaitForTheTimer(t *testing.T) {
	ctx, l := fence.New(context.Background(), time.Now().Add(-time.Millisecond))
	defer l.Stop()
	assert.ErrorIs(t, fence.Check(ctx), fence.ErrExpired)
	assert.NoError(t, fence.Check(context.Background()), "no lease, no fence")
}
