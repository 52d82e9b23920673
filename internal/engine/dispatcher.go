package engine

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
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
	// trouble: the claims failing in a row (storage errors), for back-off and logging.
	trouble claimTrouble
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
// many workers were free, whether the claim filled them all, and how long to back off before
// the next claim when it failed.
func (d *dispatcher) claimDue(ctx context.Context) (free int, full bool, backoff time.Duration) {
	free = d.free()
	if free > 0 && free < d.e.cfg.Workers/claimGatherShare {
		// Most workers are busy: let a few more finish (briefly) so one claim serves them all;
		// a claim is a committed write, costlier per operation than a step's save.
		d.e.gatherFreed(ctx, d.freed, d.enoughFree)
		free = d.free()
	}
	if free <= 0 {
		return free, false, 0
	}
	claimed, sent, err := d.e.claim(ctx, free)
	switch {
	case err != nil && ctx.Err() == nil:
		backoff = d.trouble.failed(err, d.e.log)
	case err == nil:
		d.trouble.succeeded(d.e.log)
	}
	for _, op := range claimed {
		d.busy.Add(1)
		d.start(op, sent)
	}
	d.hand.claimed()
	return free, len(claimed) == free, backoff
}

// reclaim runs again what this engine's owner held when its previous process died (a stable
// owner): the workers claim it back in one statement, before another replica could take it
// and queue it behind its own work while this one idles; what they cannot take is released.
func (d *dispatcher) reclaim(ctx context.Context) {
	claimed, sent, err := d.e.claimOf(ctx, d.free(), true)
	if err != nil {
		d.e.log.WithError(err).Warn("claiming back the operations of a previous run; they are released instead")
	}
	keep := make([]string, 0, len(claimed))
	for _, op := range claimed {
		keep = append(keep, op.ID)
		d.busy.Add(1)
		d.start(op, sent)
	}
	if len(claimed) > 0 {
		d.e.log.WithField("operations", len(claimed)).Info("claimed back the operations of a previous run of this owner")
	}
	d.e.reclaim(ctx, keep)
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
		free, full, backoff := d.claimDue(ctx)
		if backoff > 0 {
			// The storage fails: wake-ups and due hints do not bring the next claim forward.
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
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

// Claim back-off after a storage error: from claimBackoffMin, doubling up to claimBackoffMax,
// each wait jittered down by up to a half (replicas failing together do not retry together).
// While claims keep failing, a summary is logged every claimTroubleSummary.
const (
	claimBackoffMin     = 100 * time.Millisecond
	claimBackoffMax     = 10 * time.Second
	claimTroubleSummary = time.Minute
)

// claimTrouble is a run of failed claims: the first is logged, then a summary now and then, and
// the end once; the back-off grows with the run.
type claimTrouble struct {
	failures   int
	since      time.Time
	lastLogged time.Time
	lastErr    error
}

// failed records a failed claim and returns how long to wait before the next.
func (c *claimTrouble) failed(err error, log logrus.FieldLogger) time.Duration {
	now := time.Now()
	c.failures++
	c.lastErr = err
	switch {
	case c.failures == 1:
		c.since, c.lastLogged = now, now
		log.WithError(err).Error("claiming operations failed; backing off until the storage answers again")
	case now.Sub(c.lastLogged) >= claimTroubleSummary:
		c.lastLogged = now
		log.WithError(err).WithFields(logrus.Fields{"failures": c.failures, "since": c.since.UTC().Format(time.RFC3339)}).
			Error("claiming operations still fails")
	}
	d := claimBackoffMin << min(c.failures-1, 16)
	d = min(d, claimBackoffMax)
	return d - time.Duration(rand.Int64N(int64(d/2)+1))
}

// succeeded ends a run of failed claims.
func (c *claimTrouble) succeeded(log logrus.FieldLogger) {
	if c.failures == 0 {
		return
	}
	log.WithFields(logrus.Fields{"failures": c.failures, "for": time.Since(c.since).Round(time.Millisecond).String()}).
		WithField("last_error", c.lastErr.Error()).Info("claiming operations works again")
	*c = claimTrouble{}
}
