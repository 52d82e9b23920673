package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// coalescer serves concurrent calls together: executor goroutines each take a call, then every
// call waiting (up to max), and serve them with one statement. The channel is unbuffered, so a
// call that finds an executor idle is served at once, alone: coalescing adds no latency without
// a queue, and under load it turns N round trips (and commits) into one. SaveProgress's group
// commit and last_operation's reads use it.
type coalescer[Req, Res any] struct {
	calls chan *pending[Req, Res]
	quit  chan struct{}
	wg    sync.WaitGroup
	// stopped makes stop safe to repeat: a Store may be closed twice (e.g. by a test's cleanup
	// and by its owner).
	stopped sync.Once
	// queued: calls the dispatcher holds, not yet handed to an executor (tests wait on it).
	queued atomic.Int64
}

// pending is one call waiting for its answer.
type pending[Req, Res any] struct {
	ctx  context.Context
	req  Req
	done chan outcome[Res]
}

type outcome[Res any] struct {
	res Res
	err error
}

func (p *pending[Req, Res]) answer(res Res, err error) { p.done <- outcome[Res]{res: res, err: err} }

// startCoalescer starts executors goroutines that hand serve batches of up to max live calls
// (calls whose context has ended are answered with its error first); serve answers each call.
func startCoalescer[Req, Res any](executors, max int, serve func([]*pending[Req, Res])) *coalescer[Req, Res] {
	c := &coalescer[Req, Res]{calls: make(chan *pending[Req, Res]), quit: make(chan struct{})}
	for i := 0; i < executors; i++ {
		c.wg.Add(1)
		go c.execute(max, serve)
	}
	return c
}

// startBulkCoalescer is startCoalescer (batches of up to size) where the executors after the
// first only take a batch of at least othersAt calls: the first serves every call at once when
// it is idle (no added latency), the others only when the queue is deep. Spare executors that took whatever waited
// turned the calls arriving while the first was busy into statements of one or two, each
// costing more per operation than a batch's share; a deep queue (the engine bench) still
// gets them all. A dispatcher goroutine holds the queue and hands out the batches.
func startBulkCoalescer[Req, Res any](executors, size, othersAt int, serve func([]*pending[Req, Res])) *coalescer[Req, Res] {
	c := &coalescer[Req, Res]{calls: make(chan *pending[Req, Res]), quit: make(chan struct{})}
	c.wg.Add(1)
	go c.dispatch(max(executors, 1), size, othersAt, serve)
	return c
}

// dispatch queues the calls and hands each idle executor a batch of up to size: the first
// executor any, the others only one of at least othersAt calls.
func (c *coalescer[Req, Res]) dispatch(executors, size, othersAt int, serve func([]*pending[Req, Res])) {
	defer c.wg.Done()
	batches := make([]chan []*pending[Req, Res], executors)
	done := make(chan int, executors)
	var running sync.WaitGroup
	for i := range batches {
		batches[i] = make(chan []*pending[Req, Res], 1)
		running.Add(1)
		go func() {
			defer running.Done()
			for b := range batches[i] {
				serveLive(b, serve)
				done <- i
			}
		}()
	}
	busy := make([]bool, executors)
	var queue []*pending[Req, Res]
	for {
		for i := range busy {
			if busy[i] || len(queue) == 0 || (i > 0 && len(queue) < othersAt) {
				continue
			}
			n := min(len(queue), size)
			batches[i] <- append([]*pending[Req, Res](nil), queue[:n]...)
			queue = queue[n:]
			busy[i] = true
		}
		c.queued.Store(int64(len(queue)))
		select {
		case p := <-c.calls:
			queue = append(queue, p)
		case i := <-done:
			busy[i] = false
		case <-c.quit:
			for _, b := range batches {
				close(b)
			}
			running.Wait()
			var zero Res
			for _, p := range queue {
				p.answer(zero, fmt.Errorf("store is closed"))
			}
			return
		}
	}
}

func (c *coalescer[Req, Res]) stop() {
	c.stopped.Do(func() { close(c.quit) })
	c.wg.Wait()
}

// submit hands req to an executor and waits for its answer. A call whose context ends while it
// is being served may still take effect (a write: the caller re-reads).
func (c *coalescer[Req, Res]) submit(ctx context.Context, req Req) (Res, error) {
	var zero Res
	p := &pending[Req, Res]{ctx: ctx, req: req, done: make(chan outcome[Res], 1)}
	select {
	case c.calls <- p:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-c.quit:
		return zero, fmt.Errorf("store is closed")
	}
	select {
	case o := <-p.done:
		return o.res, o.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (c *coalescer[Req, Res]) execute(max int, serve func([]*pending[Req, Res])) {
	defer c.wg.Done()
	for {
		var first *pending[Req, Res]
		select {
		case <-c.quit:
			return
		case first = <-c.calls:
		}
		batch := []*pending[Req, Res]{first}
	drain:
		for len(batch) < max {
			select {
			case p := <-c.calls:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		serveLive(batch, serve)
	}
}

// serveLive answers the calls whose context has ended with its error and serves the others.
func serveLive[Req, Res any](batch []*pending[Req, Res], serve func([]*pending[Req, Res])) {
	live := batch[:0]
	var zero Res
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.answer(zero, err)
			continue
		}
		live = append(live, p)
	}
	if len(live) > 0 {
		serve(live)
	}
}

// firstOfEach splits calls into the first call of each key and the later ones (in order): a
// batch statement must not write one row twice, so a later call of a key is written after.
func firstOfEach[Req, Res any](calls []*pending[Req, Res], key func(Req) string) (first, later []*pending[Req, Res]) {
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if k := key(c.req); seen[k] {
			later = append(later, c)
		} else {
			seen[k] = true
			first = append(first, c)
		}
	}
	return first, later
}
