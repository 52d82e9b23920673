package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/fence"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run whose lease is not renewed (the heartbeat's writes hang, as in a paused or partitioned
// replica) stops acting before the lease expires: its step's context ends a sixth of the lease
// before, no request leaves through a client's HTTP client after that, and the operation is
// handed back, not failed.
func TestARunStopsBeforeItsLeaseExpires(t *testing.T) {
	const lease = 1200 * time.Millisecond
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent.Add(1) }))
	defer srv.Close()
	httpc := clientkit.NewHTTPClient(5*time.Second, nil)

	type seen struct {
		ended   time.Duration
		cause   error
		request error
	}
	out := make(chan seen, 1)
	hang := make(chan struct{})
	var claimed time.Time
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		def(step("hangs", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
			claimed = time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
			require.NoError(t, err)
			if resp, err := httpc.Do(req); err == nil { // within the lease: sent
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-hang: // the test is over (renewals go through again)
				return op, 0, nil
			}
			s := seen{ended: time.Since(claimed), cause: context.Cause(ctx)}
			// Sent at once after the end, as a step resumed from a pause would.
			req, err = http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, srv.URL, nil)
			require.NoError(t, err)
			_, s.request = httpc.Do(req)
			select {
			case out <- s: // the first run's
			default:
			}
			return op, 0, ctx.Err()
		})),
	}})
	require.NoError(t, err)
	store := newStore(t)
	ops := &hookedOps{Operations: store.Operations()}
	defer close(hang)
	ops.before = func() { <-hang } // no lease is ever renewed
	eng, err := New(hookedStore{Store: store, ops: ops}, Config{Workers: 1, LeaseDuration: lease, PollInterval: 10 * time.Millisecond}, testLogger())
	require.NoError(t, err)
	require.NoError(t, eng.Register(p))
	op := insertNow(t, store, "provision")
	testenv.Background(t, eng.Run)

	var s seen
	select {
	case s = <-out:
	case <-time.After(10 * time.Second):
		t.Fatal("the step's context did not end")
	}
	assert.Less(t, s.ended, lease, "the run stops before its lease expires")
	assert.GreaterOrEqual(t, s.ended, lease/2, "not long before: the heartbeat would renew it")
	assert.ErrorIs(t, s.cause, fence.ErrExpired)
	assert.ErrorIs(t, s.request, fence.ErrExpired, "no request leaves once the lease may be over")
	assert.Positive(t, sent.Load())
	// Handed back (due again), not failed.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := store.Operations().GetOperation(context.Background(), op.ID)
		require.NoError(t, err)
		require.NotEqual(t, storage.StateFailed, got.State, got.Description)
		if got.LeaseOwner == "" || got.Progress.Steps["hangs"].Attempts > 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the operation was not handed back")
	}
}

// The heartbeat's renewal moves the end of a running step's context: a step longer than the
// lease runs to its end while the lease is renewed.
func TestARenewedLeaseKeepsTheRunGoing(t *testing.T) {
	const lease = 900 * time.Millisecond
	done := make(chan error, 1)
	p, err := Staged("provision", time.Hour, Stage[testData]{Name: "s", Steps: []StepDef[testData]{
		{Step: step("long", func(ctx context.Context, op Operation[testData], _ logrus.FieldLogger) (Operation[testData], time.Duration, error) {
			select {
			case <-ctx.Done():
				done <- context.Cause(ctx)
			case <-time.After(3 * lease):
				done <- fence.Check(ctx)
			}
			return op, 0, nil
		}), RunTimeout: time.Minute},
	}})
	require.NoError(t, err)
	store := newStore(t)
	liveEngine(t, store, Config{Workers: 1, LeaseDuration: lease, PollInterval: 10 * time.Millisecond}, p)
	insertNow(t, store, "provision")
	select {
	case err := <-done:
		assert.NoError(t, err)
		assert.False(t, errors.Is(err, fence.ErrExpired))
	case <-time.After(20 * time.Second):
		t.Fatal("the step did not end")
	}
}
