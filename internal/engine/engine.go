// Package engine is KEB's durable step engine: operations are rows, processes are ordered
// stages of steps, and workers claim due operations from the database, run their steps until
// one waits, persist and release. A step's outcome is durable before the next step runs,
// except for steps declared Local (StepDef.Local: no external call), ReadOnly (external reads
// only) or Idempotent (external effects a run again repeats the same, no external ID kept),
// whose outcomes ride on the next write; a crash re-runs only those. Nothing that decides
// an operation's future lives only in memory once a step that changes something outside has run.
package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/internal/fence"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// Config tunes the engine; zero values take the defaults in brackets.
type Config struct {
	// Workers is how many operations run at once in this process [384]. Workers are goroutines
	// that mostly wait on I/O; more of them also make bigger group commits, at the cost of
	// memory with many operations in flight (the measurements behind the default are in
	// docs/contributor/performance.md). The external systems' clients bound their own
	// concurrency (clientkit.ConnsPerHost).
	Workers int `envconfig:"ENGINE_WORKERS" default:"384"`
	// LeaseDuration: how long a claim is valid without a heartbeat [30s]. A replica that dies
	// loses its operations to the others after this long. A run stops acting (no more calls
	// out, its step's context ends) a sixth of it before its lease expires as last renewed,
	// timed on this process's monotonic clock: a replica paused past its lease (SIGSTOP) does
	// not act for operations another replica has taken over.
	LeaseDuration time.Duration `envconfig:"ENGINE_LEASE_DURATION" default:"30s"`
	// PollInterval bounds how long an idle dispatcher waits before looking again [1s].
	PollInterval time.Duration `envconfig:"ENGINE_POLL_INTERVAL" default:"1s"`
	// SweepInterval: how often overdue operations are failed [1m].
	SweepInterval time.Duration `envconfig:"ENGINE_SWEEP_INTERVAL" default:"1m"`
	// ShutdownTimeout: how long running steps may take to finish on shutdown [30s].
	ShutdownTimeout time.Duration `envconfig:"ENGINE_SHUTDOWN_TIMEOUT" default:"30s"`
	// StepRunTimeout bounds one step run unless its StepDef.RunTimeout says otherwise [30s].
	// The stage limit, the step limit, the operation deadline and the step's retry window
	// bound it further.
	StepRunTimeout time.Duration `envconfig:"ENGINE_STEP_RUN_TIMEOUT" default:"30s"`
	// SlowRetryWarning: a step that keeps failing for this long is logged once at warn, with
	// its last error [2m]; its other retries are only events (no line per retry).
	SlowRetryWarning time.Duration `envconfig:"ENGINE_SLOW_RETRY_WARNING" default:"2m"`
	// Owner names this replica in leases [host@Address, else host-pid-random]. It must be
	// stable across restarts and unique among live replicas: on start the engine reclaims
	// every lease its owner holds, so what it held before a crash moves again at once.
	Owner string `envconfig:"ENGINE_OWNER"`
	// Address is the listen address (host:port) this process has bound before starting the
	// engine; with the host name it makes the default Owner. No other live process can bind
	// it, so no other live engine has that owner.
	Address string `ignored:"true"`
	// OnlyCreatedAfter, when set, makes this engine run only operations created at or after
	// it: operations already in flight are left to other replicas (or the sweeper). The
	// provisioner sets it to its start time when APP_ENQUEUE_IN_PROGRESS_OPERATIONS is false.
	OnlyCreatedAfter time.Time `ignored:"true"`
	// WaitBackoff stretches long healthy waits (runner.go).
	WaitBackoff
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Workers <= 0 {
		c.Workers = 384
	}
	def(&c.LeaseDuration, 30*time.Second)
	def(&c.PollInterval, time.Second)
	def(&c.SweepInterval, time.Minute)
	def(&c.ShutdownTimeout, 30*time.Second)
	def(&c.StepRunTimeout, 30*time.Second)
	def(&c.SlowRetryWarning, 2*time.Minute)
	if c.Owner == "" {
		c.Owner = DefaultOwner(c.Address)
	}
	return c
}

// DefaultOwner is host@address when this process listens on a fixed port (stable across
// restarts, unique among live processes); otherwise host-pid-random, which a restart does
// not reuse (its leases then wait to expire).
func DefaultOwner(address string) string {
	host, _ := os.Hostname()
	if _, port, err := net.SplitHostPort(address); err == nil && port != "" && port != "0" {
		return host + "@" + address
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
}

// Option adjusts an Engine.
type Option func(*Engine)

// WithClock replaces the wall clock (tests).
func WithClock(c Clock) Option { return func(e *Engine) { e.clock = c } }

// WithRegisterer registers the engine's metrics.
func WithRegisterer(r prometheus.Registerer) Option { return func(e *Engine) { e.reg = r } }

// Engine claims and runs operations of its registered processes.
type Engine struct {
	store   storage.Store
	ops     storage.Operations
	cfg     Config
	clock   Clock
	log     logrus.FieldLogger
	reg     prometheus.Registerer
	metrics *metrics
	defs    map[string]Definition
	types   []string

	stopping atomic.Bool
	dueHints chan time.Time

	mu   sync.Mutex
	held map[string]*holding
	// signals: runs waiting for an in-process signal park here (nil: none park).
	signals *Signals
}

// holding is one operation a worker runs; the heartbeat extends its lease.
type holding struct {
	// ctx is the run's: its end (unhold) removes this holding only, not a newer run's of the
	// same operation (released, then handed over or claimed again before the old run's worker
	// returned). It ends when lease does.
	ctx   context.Context
	lease *fence.Lease
	// lettingGo: the worker is writing the release or the end of the operation, so the
	// lease is expected to disappear; the heartbeat must not call that a lost lease.
	lettingGo bool
}

// New builds an engine; register processes before Run.
func New(store storage.Store, cfg Config, log logrus.FieldLogger, opts ...Option) (*Engine, error) {
	e := &Engine{
		store: store, ops: store.Operations(), cfg: cfg.withDefaults(), clock: realClock{}, log: log,
		defs: map[string]Definition{}, held: map[string]*holding{},
		dueHints: make(chan time.Time, 64),
	}
	for _, o := range opts {
		o(e)
	}
	e.log = log.WithField("engine", e.cfg.Owner)
	m, err := newMetrics(e.reg, e.ops, e.clock, e.log)
	if err != nil {
		return nil, fmt.Errorf("registering engine metrics: %w", err)
	}
	e.metrics = m
	return e, nil
}

// Register adds a process; its operation type must be new.
func (e *Engine) Register(d Definition) error {
	if _, ok := e.defs[d.Type()]; ok {
		return fmt.Errorf("registering process %s: already registered", d.Type())
	}
	e.defs[d.Type()] = d
	e.types = append(e.types, d.Type())
	return nil
}

// Owner is the lease owner name of this engine.
func (e *Engine) Owner() string { return e.cfg.Owner }

func (e *Engine) executor() *executor {
	return &executor{
		ops: e.ops, clock: e.clock, log: e.log, metrics: e.metrics, lease: e.cfg.LeaseDuration,
		runTimeout: e.cfg.StepRunTimeout, slowRetry: e.cfg.SlowRetryWarning, backoff: e.cfg.WaitBackoff.withDefaults(), stopping: e.stopping.Load, letGo: e.letGo,
		unhold: e.unhold,
		dueHint: func(t time.Time) {
			select {
			case e.dueHints <- t:
			default:
			}
		},
	}
}

// Run claims and runs operations until ctx ends, then shuts down gracefully: no new claims,
// running steps get ShutdownTimeout to finish, and every lease still held is released.
func (e *Engine) Run(ctx context.Context) error {
	if len(e.defs) == 0 {
		return errors.New("running engine: no processes registered")
	}
	wake, err := e.store.Wakeups(ctx)
	if err != nil {
		return fmt.Errorf("subscribing to operation wake-ups: %w", err)
	}
	d := newDispatcher(e)
	defer d.release()
	d.startWorkers()
	// Before hand-overs: an operation handed over is leased by this owner too, and the claim
	// back would run it a second time.
	d.reclaim(ctx)
	e.store.Takes(ctx, d.hand)
	// Heartbeats go on until the last step has finished, past ctx's end.
	hbCtx, stopHeartbeat := context.WithCancel(context.Background())
	defer stopHeartbeat()
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); e.heartbeat(hbCtx) }()
	go func() { defer bg.Done(); e.sweepLoop(ctx) }()

	e.log.WithField("workers", e.cfg.Workers).Info("engine started")
	d.loop(ctx, wake)

	d.stop()
	stopHeartbeat()
	bg.Wait()
	e.releaseHeld()
	e.log.Info("engine stopped")
	return nil
}

// While fewer than 1/claimGatherShare of the workers are free and the rest are busy, the
// dispatcher waits up to claimGatherWait for more to free up before it claims.
const (
	claimGatherShare = 4
	claimGatherWait  = 2 * time.Millisecond
)

// gatherFreed waits until enough() or claimGatherWait has passed, waking on freed workers.
func (e *Engine) gatherFreed(ctx context.Context, freed <-chan struct{}, enough func() bool) {
	t := time.NewTimer(claimGatherWait)
	defer t.Stop()
	for !enough() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-freed:
		}
	}
}

// claim claims up to limit due operations; sent is when the claim was sent, on the monotonic
// clock, from which the leases are known to be held (hold).
func (e *Engine) claim(ctx context.Context, limit int) (ops []storage.Operation, sent time.Time, err error) {
	return e.claimOf(ctx, limit, false)
}

// claimOf claims up to limit due operations or, with own, those this engine's owner leases.
func (e *Engine) claimOf(ctx context.Context, limit int, own bool) (ops []storage.Operation, sent time.Time, err error) {
	sent = time.Now()
	now := e.clock.Now().UTC()
	ops, err = e.ops.ClaimOperations(ctx, storage.ClaimRequest{
		Owner: e.cfg.Owner, Types: e.types, Now: now, LeaseUntil: now.Add(e.cfg.LeaseDuration), Limit: limit,
		CreatedAfter: e.cfg.OnlyCreatedAfter, Own: own,
	})
	// A run starts with the claim that gave its operation to this worker, or with a hand-over
	// (handOver), which the insert wrote.
	for _, op := range ops {
		e.metrics.wrote(op.Type, "claim", 0)
	}
	return ops, sent, err
}

// nextWait is how long the dispatcher may sleep: until the next due operation, at most PollInterval.
func (e *Engine) nextWait(ctx context.Context, canClaim bool) time.Duration {
	if !canClaim {
		return e.cfg.PollInterval
	}
	next, err := e.ops.NextDueAt(ctx, e.types)
	if err != nil || next == nil {
		return e.cfg.PollInterval
	}
	d := next.Sub(e.clock.Now())
	switch {
	case d > e.cfg.PollInterval:
		return e.cfg.PollInterval
	case d <= 0:
		// Due already but not claimable a moment ago (a lease being saved or just expiring):
		// look again shortly rather than spin.
		return 10 * time.Millisecond
	}
	return d
}

func resetTimer(t *time.Timer, d time.Duration) time.Time {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
	return time.Now().Add(d)
}

// reclaim releases every lease this engine's owner still holds but keep's (those it claimed
// back and runs): with a stable owner they are
// what this process held when it died, and no live process runs them. dispatcher.reclaim has
// already claimed back as many as its workers take; the rest are due at once and ahead of the
// queue (at the earliest due time of any operation), for whichever replica claims next.
func (e *Engine) reclaim(ctx context.Context, keep []string) {
	due := e.clock.Now().UTC()
	if next, err := e.ops.NextDueAt(ctx, e.types); err == nil && next != nil && next.Before(due) {
		due = *next
	}
	ids, err := e.ops.ReclaimLeases(ctx, e.cfg.Owner, due, keep)
	if err != nil {
		e.log.WithError(err).Warn("reclaiming the leases of a previous run; they will expire")
		return
	}
	if len(ids) > 0 {
		e.log.WithField("operations", len(ids)).Info("reclaimed the leases of a previous run of this owner")
	}
}

// hold records a claimed operation for heartbeats and returns the context its steps run under:
// it ends when the lease, leased at since (time.Now based, taken before the write that leased
// it), may have expired (fenceSpan), unless the heartbeat renews it first.
func (e *Engine) hold(parent context.Context, id string, since time.Time) context.Context {
	ctx, lease := fence.New(parent, since.Add(e.fenceSpan()))
	e.mu.Lock()
	e.held[id] = &holding{ctx: ctx, lease: lease}
	e.mu.Unlock()
	return ctx
}

// fenceSpan is how long after its write a lease is known to be held: the lease duration less a
// sixth for the difference between this replica's clock and the others' (each compares a
// lease's expiry with its own wall clock).
func (e *Engine) fenceSpan() time.Duration { return e.cfg.LeaseDuration - e.cfg.LeaseDuration/6 }

// unhold ends the holding of the run with ctx (hold's) of operation id.
func (e *Engine) unhold(ctx context.Context, id string) {
	e.mu.Lock()
	if h, ok := e.held[id]; ok && h.ctx == ctx {
		h.lease.Stop()
		delete(e.held, id)
	}
	e.mu.Unlock()
}

func (e *Engine) letGo(id string) {
	e.mu.Lock()
	if h, ok := e.held[id]; ok {
		h.lettingGo = true
	}
	e.mu.Unlock()
}

// heldIDs are the operations whose leases are to be kept.
func (e *Engine) heldIDs() map[string]*holding {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]*holding, len(e.held))
	for id, h := range e.held {
		if !h.lettingGo {
			out[id] = h
		}
	}
	return out
}

func (e *Engine) runOne(ctx context.Context, x *executor, op storage.Operation) {
	if def, ok := e.defs[op.Type]; !ok {
		// Cannot happen: claims are filtered by registered types.
		e.log.WithField("operation_id", op.ID).Errorf("no process for operation type %q", op.Type)
	} else if leave := def.execute(ctx, x, op); leave != nil {
		leave() // parked: still held, its run goes on when signalled
		return
	}
	e.unhold(ctx, op.ID)
}

// heartbeat extends the leases of held operations every third of the lease duration.
func (e *Engine) heartbeat(ctx context.Context) {
	t := time.NewTicker(e.cfg.LeaseDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.extendLeases(ctx)
	}
}

// extendLeases extends the leases of held operations; an operation whose lease was taken over
// gets its context cancelled so its step stops as soon as it can. Only the very holding that
// was extended is judged: a worker may meanwhile have released or finished the operation
// (its lease gone by its own write) and the dispatcher may have claimed it again.
func (e *Engine) extendLeases(ctx context.Context) {
	snapshot := e.heldIDs()
	if len(snapshot) == 0 {
		return
	}
	ids := make([]string, 0, len(snapshot))
	for id := range snapshot {
		ids = append(ids, id)
	}
	sent := time.Now()
	still, err := e.ops.ExtendLeases(ctx, e.cfg.Owner, ids, e.clock.Now().UTC().Add(e.cfg.LeaseDuration))
	if err != nil {
		e.log.WithError(err).Warn("extending leases")
		return
	}
	kept := make(map[string]bool, len(still))
	for _, id := range still {
		kept[id] = true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, h := range snapshot {
		if kept[id] {
			// Renewed: the run may act until the new expiry (less the margin) from before the
			// write was sent. A run whose lease had already run out stays stopped.
			h.lease.Extend(sent.Add(e.fenceSpan()))
			continue
		}
		if e.held[id] == h && !h.lettingGo {
			e.log.WithField("operation_id", id).Warn("lease lost; stopping the operation here")
			h.lease.Stop()
		}
	}
}

func (e *Engine) releaseHeld() {
	var ids []string
	for id := range e.heldIDs() {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.ops.ReleaseLeases(ctx, e.cfg.Owner, ids, e.clock.Now().UTC()); err != nil {
		e.log.WithError(err).Warn("releasing leases on shutdown; they will expire")
	}
}

func (e *Engine) sweepLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.SweepInterval)
	defer t.Stop()
	for {
		if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.log.WithError(err).Warn("sweeping overdue operations")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep fails active operations past their deadline that no live worker holds, even of types
// no replica runs any more. Safe in every replica at once: each row is failed by one update.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	failed, err := e.ops.FailOverdue(ctx, e.clock.Now().UTC(), "operation exceeded its deadline")
	if err != nil {
		return 0, fmt.Errorf("failing overdue operations: %w", err)
	}
	for _, op := range failed {
		e.log.WithFields(logrus.Fields{"operation_id": op.ID, "instance_id": op.InstanceID, "operation_type": op.Type}).
			Warn("operation failed by the sweeper: deadline exceeded")
		e.metrics.operationFinished(op.Type, storage.StateFailed)
	}
	return len(failed), nil
}

// RunDue runs, in the calling goroutine, every operation due at the engine clock's now until
// none is left; operations that ask to wait stay queued. It returns how many runs it made.
// Tools and deterministic tests use it instead of Run.
func (e *Engine) RunDue(ctx context.Context) (int, error) {
	x := e.executor()
	n := 0
	for ctx.Err() == nil {
		claimed, sent, err := e.claim(ctx, 1)
		if err != nil {
			return n, fmt.Errorf("claiming operations: %w", err)
		}
		if len(claimed) == 0 {
			return n, nil
		}
		op := claimed[0]
		e.runOne(e.hold(ctx, op.ID, sent), x, op)
		n++
	}
	return n, ctx.Err()
}
