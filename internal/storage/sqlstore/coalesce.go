package sqlstore

import (
	"context"
	"fmt"
	"sync"
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
}
