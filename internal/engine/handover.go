package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// handOver takes new operations for the running engine (storage.Store.Takes): the store inserts
// an operation of this engine's leased to it when a worker is kept for it, and hands it over
// after the commit, so it starts without a claim (the claim rewrote the row, a new version in
// its four indexes, and read it back in a statement of its own). A kept operation waits for a
// worker in the dispatcher's queue, up to handOverQueue of them beyond the workers, its lease
// extended by the heartbeat like a running one's. Due work is not starved: between two claims
// at most handOverQueue operations are kept, so under a stream of new operations the queue
// drains, workers free up and the dispatcher claims the operations due longest; the rest of
// the new ones wait in the database for their claim, in due order.
type handOver struct {
	e       *Engine
	busy    *atomic.Int64 // the dispatcher's count of workers running or kept
	freed   chan<- struct{}
	deliver func(op storage.Operation, since time.Time)
	// sinceClaim: operations kept since the dispatcher's last claim.
	sinceClaim atomic.Int64

	mu     sync.RWMutex
	closed bool // the engine is stopping: no worker takes anything new
}

// Reserve implements storage.Taker.
func (h *handOver) Reserve(opType string) (storage.Reservation, bool) {
	if _, ok := h.e.defs[opType]; !ok {
		return storage.Reservation{}, false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return storage.Reservation{}, false
	}
	queue := int64(handOverQueue(h.e.cfg.Workers))
	if h.sinceClaim.Add(1) > queue {
		h.sinceClaim.Add(-1)
		return storage.Reservation{}, false
	}
	limit := int64(h.e.cfg.Workers) + queue
	for {
		b := h.busy.Load()
		if b >= limit {
			h.sinceClaim.Add(-1)
			return storage.Reservation{}, false
		}
		if h.busy.CompareAndSwap(b, b+1) {
			break
		}
	}
	var once sync.Once
	// The lease is written after this, so it is known held from here (fence).
	since := time.Now()
	now := h.e.clock.Now().UTC()
	return storage.Reservation{
		Owner:      h.e.cfg.Owner,
		LeaseUntil: now.Add(h.e.cfg.LeaseDuration),
		Take:       func(op storage.Operation) { once.Do(func() { h.take(op, since) }) },
		Cancel:     func() { once.Do(h.free) },
	}, true
}

// take hands op to the kept worker; when the engine is stopping meanwhile, the worker is given
// back and op's lease released, for another replica or this engine's restart.
func (h *handOver) take(op storage.Operation, since time.Time) {
	h.mu.RLock()
	if !h.closed {
		defer h.mu.RUnlock()
		h.e.metrics.handOver(op.Type)
		h.deliver(op, since)
		return
	}
	h.mu.RUnlock()
	h.free()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.e.ops.ReleaseLeases(ctx, h.e.cfg.Owner, []string{op.ID}, h.e.clock.Now().UTC()); err != nil {
		h.e.log.WithError(err).WithField("operation_id", op.ID).Warn("releasing the lease of a new operation on shutdown; it will expire")
	}
}

// free counts a worker (running or kept) free again and tells the dispatcher.
func (h *handOver) free() {
	h.busy.Add(-1)
	select {
	case h.freed <- struct{}{}:
	default:
	}
}

// claimed is called by the dispatcher after each claim.
func (h *handOver) claimed() { h.sinceClaim.Store(0) }

// close stops taking: after it, no operation is handed to a worker.
func (h *handOver) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
}

// handOverQueue is how many new operations may wait for a worker of an engine with workers, and
// be kept between two claims: a quarter of the workers, at least one.
func handOverQueue(workers int) int { return max(1, workers/claimGatherShare) }
