package sqlstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Requests that arrive while a notification is being sent are sent as one after it.
func TestNotifierCoalesces(t *testing.T) {
	var sent atomic.Int32
	started, release := make(chan struct{}, 10), make(chan struct{})
	n := startNotifier(func(context.Context) error {
		sent.Add(1)
		started <- struct{}{}
		<-release
		return nil
	}, 0, logrus.New())
	n.request()
	<-started
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); n.request() }()
	}
	wg.Wait()
	release <- struct{}{}
	<-started
	release <- struct{}{}
	n.close()
	assert.EqualValues(t, 2, sent.Load(), "one notification, then one for the hundred that asked during it")
}

// A request pending when the store closes is still sent (released leases wake the others).
func TestNotifierSendsThePendingOnClose(t *testing.T) {
	var sent atomic.Int32
	n := startNotifier(func(context.Context) error { sent.Add(1); return nil }, time.Hour, logrus.New())
	n.request()
	require.Eventually(t, func() bool { return sent.Load() == 1 }, 5*time.Second, time.Millisecond)
	n.request() // pacing: waits an hour, unless the store closes
	n.close()
	assert.EqualValues(t, 2, sent.Load())
}
