package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// dispatcher is one run of Engine.Run: it claims due operations, hands them and resumed parked
// runs to its workers, sleeps until more is due, and stops them on shutdown.
type dispatcher struct {
	e *Engine
	x *executor
	// Steps run under stepCtx, which outlives Run's ctx by up to ShutdownTimeout.
	stepCtx  context.Context
	hardStop context.CancelFunc

	work  chan job
	freed chan struct{}
	// busy counts the workers running or kept for a handed-over operation.
	busy    atomic.Int64
	hand    *handOver
	workers sync.WaitGroup

	timer   *time.Timer
	timerAt time.Time
}

// job is one piece of work for a worker.
type job struct {
	op  storage.Operation
	ctx context.Context
	// resume: a parked run going on (Signals); op and ctx are its own.
	resume func()
}

func newDispatcher(e *Engine) *dispatcher {
	stepCtx, hardStop := context.WithCancel(context.Background())
	d := &dispatcher{
		e:        e,
		x:        e.executor(),
		stepCtx:  stepCtx,
		hardStop: hardStop,
		// Room for every worker's job and for the new operations kept waiting (handOver).
		work:  make(chan job, e.cfg.Workers+handOverQueue(e.cfg.Workers)),
		freed: make(chan struct{}, 1),
		timer: time.NewTimer(0),
	}
	d.hand = &handOver{e: e, busy: &d.busy, freed: d.freed, deliver: d.start}
	return d
}

// start gives a worker an operation this engine holds (claimed, or handed over), leased at since.
func (d *dispatcher) start(op storage.Operation, since time.Time) {
	d.work <- job{op: op, ctx: d.e.hold(d.stepCtx, op.ID, since)}
}

// resume gives a worker a parked run going on.
func (d *dispatcher) resume(run func()) {
	d.busy.Add(1)
	d.work <- job{resume: run}
}

// startWorkers lets parked runs resume on workers and starts the workers.
func (d *dispatcher) startWorkers() {
	if s := d.e.signals; s != nil {
		// Parked runs hold their operations in memory: at most one per worker, so memory stays
		// bounded with many operations in flight (docs/contributor/performance.md).
		s.start(d.e.cfg.Workers, d.resume)
		d.x.park = s.park
	}
	for i := 0; i < d.e.cfg.Workers; i++ {
		d.workers.Add(1)
		go d.worker()
	}
}

func (d *dispatcher) worker() {
	defer d.workers.Done()
	for j := range d.work {
		if j.resume != nil {
			j.resume()
		} else {
			d.e.runOne(j.ctx, d.x, j.op)
		}
		d.hand.free()
	}
}

// free is how many workers are neither running nor kept; below zero when new operations kept
// for workers wait beyond them (handOver).
func (d *dispatcher) free() int { return d.e.cfg.Workers - int(d.busy.Load()) }

// enoughFree says whether a claim now serves enough workers to be worth its write.
func (d *dispatcher) enoughFree() bool { return d.free() >= d.e.cfg.Workers/claimGatherShare }

// claimDue claims as many due operations as workers are free and starts them; it returns how
// many workers were free and whether the claim filled them all.
func (d *dispatcher) claimDue(ctx context.Context) (free int, full bool) {
	free = d.free()
	if free > 0 && free < d.e.cfg.Workers/claimGatherShare {
		// Most workers are busy: let a few more finish (briefly) so one claim serves them all;
		// a claim is a committed write, costlier per operation than a step's save.
		d.e.gatherFreed(ctx, d.freed, d.enoughFree)
		free = d.free()
	}
	if free <= 0 {
		return free, false
	}
	claimed, sent, err := d.e.claim(ctx, free)
	if err != nil && ctx.Err() == nil {
		d.e.log.WithError(err).Error("claiming operations")
	}
	for _, op := range claimed {
		d.busy.Add(1)
		d.start(op, sent)
	}
	d.hand.claimed()
	return free, len(claimed) == free
}

// sleep waits until the next due time, a wake-up, a freed worker (when none is free) or ctx's
// end; a due hint brings the wake-up forward.
func (d *dispatcher) sleep(ctx context.Context, wake <-chan struct{}, free int) {
	d.timerAt = resetTimer(d.timer, d.e.nextWait(ctx, free > 0))
	var freedCh <-chan struct{}
	if free <= 0 {
		// Below zero: new operations kept for workers wait beyond them (handOver).
		freedCh = d.freed
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			return
		case <-freedCh:
			return
		case <-d.timer.C:
			return
		case due := <-d.e.dueHints:
			if w := time.Until(due); w < time.Until(d.timerAt) {
				d.timerAt = resetTimer(d.timer, w)
			}
		}
	}
}

// loop dispatches until ctx ends.
func (d *dispatcher) loop(ctx context.Context, wake <-chan struct{}) {
	for ctx.Err() == nil {
		free, full := d.claimDue(ctx)
		if full {
			continue
		}
		// Nothing more is due now: sleep until the next due time, a wake-up or a freed worker.
		d.sleep(ctx, wake, free)
	}
}

// stop takes nothing new, gives parked runs back to workers, and waits for the workers up to
// ShutdownTimeout before it cancels the running steps.
func (d *dispatcher) stop() {
	d.e.stopping.Store(true)
	d.hand.close()
	if d.e.signals != nil {
		// Parked runs go back to workers, which release their operations.
		d.e.signals.close()
	}
	close(d.work)
	done := make(chan struct{})
	go func() { d.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d.e.cfg.ShutdownTimeout):
		d.e.log.Warn("shutdown timeout: cancelling running steps")
		d.hardStop()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			d.e.log.Error("steps ignored cancellation; their leases will expire")
		}
	}
}

// release frees what the dispatcher holds beyond its workers.
func (d *dispatcher) release() {
	d.timer.Stop()
	d.hardStop()
}
