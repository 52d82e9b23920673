package sqlstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gate is a serve function whose batches are recorded and held until released.
type gate struct {
	mu      sync.Mutex
	batches [][]int
	release chan struct{}
	started chan struct{}
}

func newGate() *gate {
	return &gate{release: make(chan struct{}, 100), started: make(chan struct{}, 100)}
}

func (g *gate) serve(batch []*pending[int, int]) {
	var got []int
	for _, p := range batch {
		got = append(got, p.req)
	}
	g.mu.Lock()
	g.batches = append(g.batches, got)
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	for _, p := range batch {
		p.answer(p.req, nil)
	}
}

func (g *gate) served() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]int(nil), g.batches...)
}

// submitAll submits each request in its own goroutine; wait for their answers with the group.
func submitAll(c *coalescer[int, int], reqs ...int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.submit(context.Background(), r)
		}()
	}
	return &wg
}

// While the first executor is busy, calls fewer than othersAt wait for it and go out together:
// the spare executor does not write them one by one.
func TestBulkCoalescerSpareExecutorWaitsForADeepQueue(t *testing.T) {
	g := newGate()
	c := startBulkCoalescer(2, 100, 4, g.serve)
	defer c.stop()

	first := submitAll(c, 1)
	<-g.started // the first executor holds [1]
	rest := submitAll(c, 2, 3, 4)
	require.Eventually(t, func() bool { return c.queued.Load() == 3 }, 5*time.Second, time.Millisecond)
	assert.Len(t, g.served(), 1, "three calls are fewer than 4: the spare executor leaves them")

	g.release <- struct{}{}
	first.Wait()
	<-g.started // the first executor, free again, takes all three
	g.release <- struct{}{}
	rest.Wait()
	got := g.served()
	require.Len(t, got, 2)
	assert.Equal(t, []int{1}, got[0])
	assert.ElementsMatch(t, []int{2, 3, 4}, got[1])
}

// A queue of othersAt calls or more engages the spare executor while the first is busy.
func TestBulkCoalescerDeepQueueEngagesTheSpareExecutor(t *testing.T) {
	g := newGate()
	c := startBulkCoalescer(2, 100, 3, g.serve)
	defer c.stop()

	first := submitAll(c, 1)
	<-g.started
	rest := submitAll(c, 2, 3, 4)
	<-g.started // the spare executor took the three while the first still holds [1]
	got := g.served()
	require.Len(t, got, 2)
	assert.ElementsMatch(t, []int{2, 3, 4}, got[1])
	g.release <- struct{}{}
	g.release <- struct{}{}
	first.Wait()
	rest.Wait()
}

// Closing the store answers every call: those still queued are refused (or served, when an
// executor frees up first), the batches being served finish.
func TestBulkCoalescerStopAnswersTheQueue(t *testing.T) {
	g := newGate()
	c := startBulkCoalescer(2, 100, 10, g.serve)
	first := submitAll(c, 1)
	<-g.started
	errs := make(chan error, 2)
	for _, r := range []int{2, 3} {
		go func() {
			_, err := c.submit(context.Background(), r)
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return c.queued.Load() == 2 }, 5*time.Second, time.Millisecond)
	stopped := make(chan struct{})
	go func() { c.stop(); close(stopped) }()
	g.release <- struct{}{}
	g.release <- struct{}{} // for [2 3], should the freed executor take them before the stop
	first.Wait()
	<-stopped
	for range 2 {
		if err := <-errs; err != nil {
			require.EqualError(t, err, "store is closed")
		}
	}
}
