package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/retryhint"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/fastjson"
	"github.com/kyma-project/kyma-environment-broker/internal/fence"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// Definition is a process the engine can run; *Process[T] implements it.
type Definition interface {
	Type() string
	Timeout() time.Duration
	// execute runs the operation until it waits or ends. A run that waits in memory for a
	// signal (Signals), its operation still held, returns leave: the worker calls it once it
	// is done with the run, which may then go on on another worker.
	execute(ctx context.Context, x *executor, raw storage.Operation) (leave func())
}

// executor is what a process needs from the engine to run one claimed operation.
type executor struct {
	ops     storage.Operations
	clock   Clock
	log     logrus.FieldLogger
	metrics *metrics
	lease   time.Duration
	// runTimeout bounds one step run unless its StepDef.RunTimeout says otherwise.
	runTimeout time.Duration
	// slowRetry: a step failing for this long is logged once at warn (Config.SlowRetryWarning).
	slowRetry time.Duration
	// backoff stretches the intervals of long healthy waits.
	backoff  WaitBackoff
	stopping func() bool
	// dueHint tells the dispatcher when a released operation becomes due again.
	dueHint func(time.Time)
	// letGo tells the heartbeat, before the write that gives the lease up, that the operation
	// is being released or finished: its lease is no longer expected to be extended.
	letGo func(id string)
	// unhold ends the holding of a run that was parked (Engine.unhold).
	unhold func(ctx context.Context, id string)
	// park parks a run on a signal key (Signals.park); nil: no run parks.
	park func(key string, wait time.Duration, run func()) parkOutcome
}

// run holds the state of one operation while a worker runs its steps.
type run[T any] struct {
	p       *Process[T]
	x       *executor
	op      Operation[T]
	log     logrus.FieldLogger
	pending []storage.Event
	// unsaved: a non-local step finished since the last durable write; its outcome (the IDs of
	// what it created) is written before the next step runs.
	unsaved bool
	// savedSecrets is a copy of the secrets the row holds (steps may change the map in place):
	// a save whose secrets equal it leaves the column as it is (storage.KeepSecrets).
	savedSecrets storage.Secrets
	// deferred: the instance's or runtime's fields steps set since the last save, written with
	// the next (DeferInstanceFields).
	deferred storage.Save
	memo     runMemo
	// leave: set while the run is parked (Signals), for the worker that parked it;
	// parkedOnce: it has parked once (a wait after that is written).
	leave      func()
	parkedOnce bool
}

func (p *Process[T]) execute(ctx context.Context, x *executor, raw storage.Operation) (leave func()) {
	r := &run[T]{p: p, x: x, op: Operation[T]{Operation: raw}, savedSecrets: maps.Clone(raw.Secrets)}
	// Every run of the operation's steps is in the operation's own trace (observe.OperationTrace).
	ctx = observe.InOperationTrace(ctx, raw.ID)
	r.log = x.log.WithFields(logrus.Fields{"operation_id": raw.ID, "instance_id": raw.InstanceID, "operation_type": raw.Type}).WithContext(ctx)
	if len(raw.Data) > 0 {
		// Every claim decodes the data (a poll of a waiting operation too): fastjson, not
		// encoding/json's reflection.
		if err := fastjson.Unmarshal(raw.Data, &r.op.Data); err != nil {
			r.fail(x.clock.Now(), "", fmt.Sprintf("decoding operation data: %v", err), 0)
			return nil
		}
	}
	if r.op.Deadline.IsZero() {
		r.op.Deadline = r.op.CreatedAt.Add(p.timeout)
	}
	if r.op.Progress.Steps == nil {
		// Sized for the whole process: the map would otherwise grow while the steps run.
		r.op.Progress.Steps = make(map[string]storage.StepProgress, p.steps)
	}
	r.loop(ctx)
	return r.leave
}

func (r *run[T]) loop(ctx context.Context) {
	for {
		now := r.x.clock.Now().UTC()
		if r.x.stopping() || ctx.Err() != nil || fence.Check(ctx) != nil {
			r.release(now)
			return
		}
		stage, sd, ok := r.next(now)
		if !ok {
			r.succeed(now)
			return
		}
		name := sd.Step.Name()
		if sd.Condition != nil && !sd.Condition(r.op) {
			r.markStep(name, func(sp *storage.StepProgress) { sp.Done, sp.Skipped = true, true })
			r.stageEvent(now, stage.Name, name, storage.EventSkipped, "condition not met", 0, 0)
			r.x.metrics.stepFinished(r.op.Type, name, "skipped", 0)
			continue
		}
		r.creditLate(now, name)
		if l, over := r.reached(now, stage, sd); over {
			if r.verdict(now, sd, l, "", 0) {
				continue
			}
			return
		}
		r.op.Stage = stage.Name
		r.markStep(name, func(sp *storage.StepProgress) {
			if sp.FirstAttempt.IsZero() {
				sp.FirstAttempt = now
			}
			sp.Attempts++
		})
		if r.op.State == storage.StatePending {
			r.op.State = storage.StateInProgress
			r.op.Description = "operation in progress"
		}
		// A non-local step's outcome is durable before any later step runs. Local, read-only and
		// idempotent steps' outcomes (and a step's start) ride on the next write: a crash before
		// it only re-runs those steps and the attempt that was running.
		if r.unsaved {
			if !r.save(now, true) {
				return
			}
			r.unsaved = false
		}
		if !r.runStep(ctx, stage, sd, now) {
			return
		}
	}
}

// next finds the first step that is not done, marking completed stages finished.
func (r *run[T]) next(now time.Time) (Stage[T], StepDef[T], bool) {
	for _, st := range r.p.stages {
		if r.op.Progress.StageFinished(st.Name) {
			continue
		}
		if _, started := r.op.Progress.StageStartedAt[st.Name]; !started {
			if r.op.Progress.StageStartedAt == nil {
				r.op.Progress.StageStartedAt = map[string]time.Time{}
			}
			r.op.Progress.StageStartedAt[st.Name] = now
		}
		for _, sd := range st.Steps {
			if !r.op.Progress.Steps[sd.Step.Name()].Done {
				return st, sd, true
			}
		}
		r.op.Progress.FinishedStages = append(r.op.Progress.FinishedStages, st.Name)
	}
	return Stage[T]{}, StepDef[T]{}, false
}

// minLate is the least delay past a run's due time that counts as the engine's: a worker taking
// a due operation within it is normal dispatch.
const minLate = time.Second

// creditLate records how late this run of the step starts after the end of its last wait
// (StepProgress.Late). Under a backlog of due operations polls can run minutes late, and that time counted against stage limits: provisionings failed with
// "exceeded its time limit" while their clusters were fine.
func (r *run[T]) creditLate(now time.Time, name string) {
	if r.op.Progress.Steps[name].Due.IsZero() {
		return
	}
	r.markStep(name, func(sp *storage.StepProgress) {
		if late := now.Sub(sp.Due); late >= minLate {
			sp.Late += late
		}
		sp.Due = time.Time{}
	})
}

// stageLate is the delay credited to the stage's steps.
func (r *run[T]) stageLate(st Stage[T]) time.Duration {
	var late time.Duration
	for _, sd := range st.Steps {
		late += r.op.Progress.Steps[sd.Step.Name()].Late
	}
	return late
}

// limit is a time by which a step must be done, and what passing it means.
type limit struct {
	at   time.Time
	kind limitKind
	// of: the stage's name (stage limit); d: the limit's duration (stage, step, retry window).
	of string
	d  time.Duration
	// late: the engine's delay the limit was moved by (stage and step limits).
	late time.Duration
}

type limitKind int

const (
	deadlineLimit limitKind = iota
	stageLimit
	stepLimit
	// windowLimit: the end of the step's retry window (the others are hard limits).
	windowLimit
)

// reason says what passing the limit means. It is formatted only when a limit is reached:
// limits are looked at several times per step run.
func (l limit) reason() string {
	switch l.kind {
	case stageLimit:
		return fmt.Sprintf("stage %s exceeded its time limit of %s", l.of, l.d) + l.lateNote()
	case stepLimit:
		return fmt.Sprintf("exceeded its time limit of %s", l.d) + l.lateNote()
	case windowLimit:
		return fmt.Sprintf("gave up after its retry window of %s", l.d)
	}
	return fmt.Sprintf("operation exceeded its deadline %s", l.at.Format(time.RFC3339))
}

func (l limit) lateNote() string {
	if l.late == 0 {
		return ""
	}
	return fmt.Sprintf(" (not counting %s its runs waited for a worker)", l.late.Round(time.Millisecond))
}

// limitSet holds a step's limits by value: they are looked at several times per step run, and
// a slice of them was an allocation each time.
type limitSet struct {
	n int
	l [4]limit
}

func (s *limitSet) add(l limit) { s.l[s.n] = l; s.n++ }

func (s *limitSet) all() []limit { return s.l[:s.n] }

// limits are the step's limits in the order a verdict names them: the operation deadline, the
// stage limit, the step limit, the end of the step's retry window.
func (r *run[T]) limits(st Stage[T], sd StepDef[T]) limitSet {
	sp := r.op.Progress.Steps[sd.Step.Name()]
	var out limitSet
	out.add(limit{at: r.op.Deadline, kind: deadlineLimit})
	// Stage and step limits do not count the time runs waited for a worker (creditLate); the
	// operation deadline is absolute, and a retry window measures the system being retried.
	if started, ok := r.op.Progress.StageStartedAt[st.Name]; ok && st.Timeout > 0 {
		late := r.stageLate(st)
		out.add(limit{at: started.Add(st.Timeout + late), kind: stageLimit, of: st.Name, d: st.Timeout, late: late})
	}
	if sd.Timeout > 0 && !sp.FirstAttempt.IsZero() {
		out.add(limit{at: sp.FirstAttempt.Add(sd.Timeout + sp.Late), kind: stepLimit, d: sd.Timeout, late: sp.Late})
	}
	if sp.RetryUntil != nil {
		window := sp.RetryUntil.Sub(retryWindowStart(sp, *sp.RetryUntil))
		out.add(limit{at: *sp.RetryUntil, kind: windowLimit, d: window})
	}
	return out
}

// reached returns the first of the step's limits that now has reached.
func (r *run[T]) reached(now time.Time, st Stage[T], sd StepDef[T]) (limit, bool) {
	ls := r.limits(st, sd)
	for _, l := range ls.all() {
		if !now.Before(l.at) {
			return l, true
		}
	}
	return limit{}, false
}

// verdict ends the step at a limit it reached: the end of a RetryOperationWithoutFail window
// records it as executed but not completed and the operation goes on (true); any other limit
// fails the operation, naming the step, the limit and the step's last error.
func (r *run[T]) verdict(now time.Time, sd StepDef[T], l limit, lastErr string, took time.Duration) bool {
	name := sd.Step.Name()
	sp := r.op.Progress.Steps[name]
	if lastErr == "" {
		lastErr = sp.LastError
	}
	if l.kind == windowLimit && sp.RetryWithoutFail {
		if !slices.Contains(r.op.Progress.ExecutedButNotCompleted, name) {
			r.op.Progress.ExecutedButNotCompleted = append(slices.Clone(r.op.Progress.ExecutedButNotCompleted), name)
		}
		r.stepDone(now, sd, took)
		return true
	}
	r.x.metrics.stepFinished(r.op.Type, name, "failed", took)
	r.fail(now, name, storage.LimitVerdict(name, l.reason(), lastErr), took)
	return false
}

// runContext is the context one run of the step runs under: it ends at the earliest of the run
// timeout and the step's limits, so no run outlives a limit by more than the call it is in.
func (r *run[T]) runContext(ctx context.Context, now time.Time, st Stage[T], sd StepDef[T]) (context.Context, context.CancelFunc) {
	timeout := r.x.runTimeout
	if sd.RunTimeout > 0 {
		timeout = sd.RunTimeout
	}
	end := now.Add(timeout)
	ls := r.limits(st, sd)
	for _, l := range ls.all() {
		if l.at.Before(end) {
			end = l.at
		}
	}
	// Limits are on the engine's clock; the context's deadline is on the wall clock.
	return context.WithTimeout(ctx, end.Sub(now))
}

// runStep runs one step and applies its outcome; it reports whether the worker goes on.
func (r *run[T]) runStep(ctx context.Context, st Stage[T], sd StepDef[T], started time.Time) bool {
	name := sd.Step.Name()
	stepCtx, cancel := r.runContext(ctx, started, st, sd)
	defer cancel()
	stepCtx = context.WithValue(stepCtx, deferralKey{}, deferral(r))
	stepCtx, hold := retryhint.WithHold(stepCtx)
	stepCtx, span := otel.Tracer(tracerName).Start(stepCtx, "step "+name, trace.WithAttributes(
		attribute.String("keb.operation_type", r.op.Type), attribute.String("keb.step", name),
		attribute.String("keb.operation_id", r.op.ID), attribute.String("keb.instance_id", r.op.InstanceID)))
	defer span.End()
	in := r.op
	in.step, in.now, in.clock, in.memo = name, started, r.x.clock, &r.memo
	var stepLog logrus.FieldLogger = r.log
	if e, ok := r.log.(*logrus.Entry); ok {
		stepLog = e.WithContext(stepCtx)
	}
	out, wait, err := callStep(stepCtx, sd.Step, in, newStepLogger(stepLog, name))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	} else if out.failing {
		span.SetStatus(codes.Error, out.LastError)
	}
	now := r.x.clock.Now().UTC()
	took := now.Sub(started)
	r.adopt(out)
	if out.retryUntil != nil {
		r.markStep(name, func(sp *storage.StepProgress) { sp.RetryUntil, sp.RetryWithoutFail = out.retryUntil, out.withoutFail })
	}
	// The step's own last failure: what a retry helper was told, else the error it returned.
	lastErr := ""
	if out.failing {
		lastErr = r.op.LastError
	} else if err != nil {
		lastErr = err.Error()
	}
	if lastErr != "" {
		r.markStep(name, func(sp *storage.StepProgress) { sp.LastError = lastErr })
	}

	switch {
	case err != nil && (ctx.Err() != nil || fence.Check(ctx) != nil || r.x.stopping()):
		// Interrupted by shutdown or a lost or expiring lease, not a verdict on the step: run
		// it again later. (A run ended by one of the step's limits is judged below.)
		r.log.WithError(err).WithField("step", name).Info("step interrupted, operation released")
		r.release(now)
		return false
	case err != nil:
		// A hard limit reached is the verdict, and so is the end of the retry window when it
		// cut the run short (a retry helper that gave up has said so itself).
		if l, over := r.reached(now, st, sd); over && (l.kind != windowLimit || !out.failing) {
			return r.verdict(now, sd, l, lastErr, took)
		}
		r.x.metrics.stepFinished(r.op.Type, name, "failed", took)
		r.fail(now, name, err.Error(), took)
		return false
	case wait > 0:
		if !out.failing {
			// A healthy wait: a failure after it gets a fresh retry window, and a long wait is
			// polled less often.
			r.markStep(name, func(sp *storage.StepProgress) { sp.LastHealthy, sp.RetryUntil = started, nil })
			wait = r.x.backoff.stretch(wait, now.Sub(r.op.Progress.Steps[name].FirstAttempt), out.signaled)
		}
		if l, over := r.reached(now, st, sd); over {
			return r.verdict(now, sd, l, "", took)
		}
		r.x.metrics.stepFinished(r.op.Type, name, "retrying", took)
		r.x.metrics.retry(r.op.Type, name)
		if out.failing {
			r.warnSlow(now, name)
		}
		held := ""
		if out.failing {
			// A circuit that holds the system's calls makes every run before it opens fail at
			// once: the next run is when it lets a probe through.
			if until, why := hold.Until(); until.After(now.Add(wait)) {
				wait, held = until.Sub(now), why
			}
		}
		// No run past the step's first limit, so that the limit fires on time; the event tells
		// when the step really runs again.
		givesUp := r.firstLimit(st, sd)
		due := now.Add(wait)
		if !givesUp.IsZero() && givesUp.Before(due) {
			due = givesUp
		}
		wait = due.Sub(now)
		r.markStep(name, func(sp *storage.StepProgress) { sp.Due, sp.GivesUpAt = due, givesUp })
		// One event per change of what the step waits for: a poll that finds the same as the
		// last one only counts as an attempt in the step's progress.
		if waitingFor := withCause("retrying", r.op.LastError); r.op.Progress.Steps[name].LastWait != waitingFor {
			r.markStep(name, func(sp *storage.StepProgress) { sp.LastWait = waitingFor })
			r.event(now, name, storage.EventRetrying, withCause(nextTry(now, due, givesUp, held), r.op.LastError), took, wait)
		}
		key := out.signalKey
		if out.failing {
			key = "" // a failure's retry is not signalled
		}
		switch r.park(ctx, name, key, wait) {
		case parkHeld:
			return false // the worker goes; the run goes on when signalled
		case parkSignaled:
			return true // what it waits for is done already: run the step again now
		}
		r.op.DueAt = &due
		r.op.LeaseOwner, r.op.LeaseExpiresAt = "", nil
		if r.save(now, false) {
			r.x.dueHint(due)
		}
		return false
	default:
		r.stepDone(now, sd, took)
		return true
	}
}

// warnSlow logs once per step, at warn, that the step has been failing for longer than the
// engine's SlowRetryWarning, with its last error: an outage shows in the log while it lasts,
// not only at the final failure, and the retries before and after it write no line.
func (r *run[T]) warnSlow(now time.Time, name string) {
	sp := r.op.Progress.Steps[name]
	if sp.SlowWarned || r.x.slowRetry <= 0 {
		return
	}
	since := retryWindowStart(sp, now)
	if now.Sub(since) < r.x.slowRetry {
		return
	}
	r.markStep(name, func(sp *storage.StepProgress) { sp.SlowWarned = true })
	r.log.WithFields(logrus.Fields{"step": name, "failing_since": since, "attempts": sp.Attempts, "last_error": r.op.LastError}).
		Warnf("step failing for more than %s, still retrying", r.x.slowRetry)
}

// park parks the run on key (Operation.WaitIsSignaledBy), its lease kept and nothing written:
// the step's retry and its event ride on the next write (Signals).
func (r *run[T]) park(ctx context.Context, step, key string, wait time.Duration) parkOutcome {
	if key == "" || r.x.park == nil {
		return parkRefused
	}
	out := parkRefused
	if !r.parkedOnce && !r.x.stopping() {
		r.parkedOnce = true
		// The signal may come before the parking worker has returned from the run: the run
		// goes on only once that worker has left it.
		left := make(chan struct{})
		out = r.x.park(key, wait, func() {
			<-left
			r.leave = nil
			r.memo = runMemo{} // what the run kept may be what the wait was for
			r.loop(ctx)        // it does not park again (parkedOnce)
			r.x.unhold(ctx, r.op.ID)
		})
		switch out {
		case parkSignaled:
			r.memo = runMemo{}
		case parkHeld:
			r.leave = func() { close(left) }
			r.log.WithFields(logrus.Fields{"step": step, "signal": key}).Debug("waiting in memory for a signal")
		}
	} else if !r.x.stopping() && r.x.park(key, wait, nil) == parkSignaled {
		// Parked once already, and signalled while the step ran: run it again now rather
		// than write a wait the signal's wake cannot shorten (the operation is leased).
		out = parkSignaled
		r.memo = runMemo{}
	}
	r.x.metrics.park(r.op.Type, out)
	return out
}

// withCause appends what a step waits for or failed with, when there is something.
func withCause(s, cause string) string {
	if cause == "" {
		return s
	}
	return s + ": " + cause
}

// stepDone records the step as done; a step given up as not completed says so with its last error.
func (r *run[T]) stepDone(now time.Time, sd StepDef[T], took time.Duration) {
	name := sd.Step.Name()
	r.unsaved = r.unsaved || !sd.noWriteOfItsOwn()
	r.x.metrics.stepFinished(r.op.Type, name, "succeeded", took)
	msg := ""
	if slices.Contains(r.op.Progress.ExecutedButNotCompleted, name) {
		msg = "executed but not completed: " + r.op.Progress.Steps[name].LastError
	}
	r.markStep(name, func(sp *storage.StepProgress) { sp.Done = true })
	r.event(now, name, storage.EventSucceeded, msg, took, 0)
}

// callStep runs the step, turning a panic into an error so one bad step fails only its operation.
func callStep[T any](ctx context.Context, s Step[T], op Operation[T], log logrus.FieldLogger) (out Operation[T], wait time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.WithField("stack", string(debug.Stack())).Error("step panicked")
			out, wait, err = op, 0, fmt.Errorf("step %s panicked: %v", s.Name(), p)
		}
	}()
	return s.Run(ctx, op, log)
}

// adopt takes from a step's result only what steps own; scheduling and progress stay the engine's.
func (r *run[T]) adopt(out Operation[T]) {
	r.op.Data = out.Data
	r.op.Secrets = out.Secrets
	r.op.Description = out.Description
	r.op.LastError = out.LastError
	r.op.Progress.ExecutedButNotCompleted = out.Progress.ExecutedButNotCompleted
}

// firstLimit is the earliest of the step's limits: when it stops being retried.
func (r *run[T]) firstLimit(st Stage[T], sd StepDef[T]) time.Time {
	var first time.Time
	ls := r.limits(st, sd)
	for _, l := range ls.all() {
		if first.IsZero() || l.at.Before(first) {
			first = l.at
		}
	}
	return first
}

// nextTry says when a retrying step runs again (due, from now) and when it gives up: the real
// times, a circuit's hold (held, its reason) and the limits included, not the step's interval.
func nextTry(now, due, givesUp time.Time, held string) string {
	if !givesUp.IsZero() && !due.Before(givesUp) {
		// The run at the limit is the verdict, not another try.
		in := roughly(givesUp.Sub(now))
		if held != "" {
			in += "; " + held + " past then"
		}
		return fmt.Sprintf("no further try: gives up at %s (in %s)", stamp(givesUp), in)
	}
	in := roughly(due.Sub(now))
	if held != "" {
		in += "; " + held + " until then"
	}
	msg := fmt.Sprintf("next try at %s (in %s)", stamp(due), in)
	if !givesUp.IsZero() {
		msg += ", gives up at " + stamp(givesUp)
	}
	return msg
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// roughly is d as an operator reads it: whole seconds from 10 s, tenths below, milliseconds
// under a second.
func roughly(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.String()
}

func (r *run[T]) markStep(name string, f func(*storage.StepProgress)) {
	if r.op.Progress.Steps == nil {
		r.op.Progress.Steps = map[string]storage.StepProgress{}
	}
	sp := r.op.Progress.Steps[name]
	f(&sp)
	r.op.Progress.Steps[name] = sp
}

func (r *run[T]) event(now time.Time, step string, typ storage.EventType, msg string, took, wait time.Duration) {
	r.stageEvent(now, r.op.Stage, step, typ, msg, took, wait)
}

// stageEvent is event for a step of the given stage (a skipped step's, before op.Stage is set).
func (r *run[T]) stageEvent(now time.Time, stage, step string, typ storage.EventType, msg string, took, wait time.Duration) {
	r.pending = append(r.pending, storage.Event{
		OperationID: r.op.ID, InstanceID: r.op.InstanceID, Step: step, Stage: stage, Type: typ,
		Message: msg, Duration: took, Wait: wait, CreatedAt: now,
	})
}

// Descriptions of a succeeded operation: plain, or naming the steps it did not complete.
const (
	succeededDescription = "operation succeeded"
	notCompletedPrefix   = succeededDescription + "; not completed: "
)

// LeftBehind reads a succeeded operation's description: the steps it did not complete, with
// their last errors, and whether there were any. A process that waits for another (the broker's
// deprovisioning for the provisioner's) passes them on.
func LeftBehind(description string) (string, bool) {
	left, ok := strings.CutPrefix(description, notCompletedPrefix)
	if !ok || left == "" {
		return "", false
	}
	return left, true
}

func (r *run[T]) succeed(now time.Time) {
	description := succeededDescription
	if left := r.op.Progress.ExecutedButNotCompleted; len(left) > 0 {
		// What was left behind and why (each step's last error names the system and its answer).
		parts := make([]string, len(left))
		for i, name := range left {
			parts[i] = name
			if msg := r.op.Progress.Steps[name].LastError; msg != "" {
				parts[i] = fmt.Sprintf("%s (%s)", name, msg)
			}
		}
		description = notCompletedPrefix + strings.Join(parts, ", ")
		r.event(now, "", storage.EventSucceeded, description, 0, 0)
	}
	r.finish(storage.StateSucceeded, description)
	r.save(now, false)
	r.x.metrics.operationFinished(r.op.Type, storage.StateSucceeded)
}

func (r *run[T]) fail(now time.Time, step, msg string, took time.Duration) {
	r.log.WithFields(logrus.Fields{"step": step, "reason": msg}).Warn("operation failed")
	r.event(now, step, storage.EventFailed, msg, took, 0)
	r.finish(storage.StateFailed, msg)
	r.op.LastError = msg
	r.save(now, false)
	r.x.metrics.operationFinished(r.op.Type, storage.StateFailed)
}

func (r *run[T]) finish(state storage.OperationState, description string) {
	r.op.State = state
	r.op.Description = description
	r.op.DueAt = nil
	r.op.LeaseOwner, r.op.LeaseExpiresAt = "", nil
}

// release hands the operation back, due now, keeping everything done so far.
func (r *run[T]) release(now time.Time) {
	r.op.DueAt = &now
	r.op.LeaseOwner, r.op.LeaseExpiresAt = "", nil
	r.save(now, false)
}

// save persists the operation and pending events in one transaction. keepLease renews the
// lease for the next step. It reports false when the operation is no longer ours to write.
func (r *run[T]) save(now time.Time, keepLease bool) bool {
	raw, err := json.Marshal(r.op.Data)
	if err != nil {
		r.log.WithError(err).Error("encoding operation data; operation left to its lease expiry")
		return false
	}
	// Payload the steps left as the row holds it is not written again (most steps change
	// neither; a rewrite copies kilobytes of data and encrypted secrets per step).
	with := r.deferred
	with.Kept = 0
	if bytes.Equal(raw, r.op.Operation.Data) {
		with.Kept |= storage.KeepData
	}
	if maps.Equal(r.op.Secrets, r.savedSecrets) {
		with.Kept |= storage.KeepSecrets
	}
	r.op.Operation.Data = raw
	switch {
	case keepLease && leaseFresh(r.op.LeaseExpiresAt, now, r.x.lease):
		// While leased an operation is due when its lease expires (the last expiry this
		// worker saw written: the save returns it).
		due := *r.op.LeaseExpiresAt
		r.op.DueAt = &due
	case keepLease:
		until := now.Add(r.x.lease)
		r.op.LeaseExpiresAt = &until
		r.op.DueAt = &until
	default:
		r.x.letGo(r.op.ID)
	}
	// Persist even while shutting down: the step's outcome must not be lost.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	saved, err := r.x.ops.SaveProgress(ctx, r.op.Operation, with, r.pending)
	events := len(r.pending)
	r.pending = nil
	if err != nil {
		if errors.Is(err, storage.ErrConflict) {
			r.log.Warn("operation changed or lease lost while running; leaving it to its new owner")
		} else {
			r.log.WithError(err).Error("saving operation progress; it continues after its lease expires")
		}
		return false
	}
	if with.Kept&storage.KeepSecrets == 0 {
		r.savedSecrets = maps.Clone(saved.Secrets)
	}
	r.deferred = storage.Save{}
	r.op.Operation = saved
	r.x.metrics.wrote(r.op.Type, "save", events)
	return true
}

// leaseFresh: more than two thirds of a lease of the given duration remain at now. A save that
// keeps such a lease leaves its expiry and due time as they are: due_at is indexed, so an
// unchanged one lets PostgreSQL update the row in place (a HOT update, no index entries),
// and the heartbeat renews the lease every third of its duration anyway.
func leaseFresh(expires *time.Time, now time.Time, lease time.Duration) bool {
	return expires != nil && expires.Sub(now) > lease*2/3
}

// WaitBackoff stretches the poll interval of a step that keeps waiting healthily (not failing):
// a cluster that takes 30 minutes need not be asked every few seconds. Failing retries keep the
// step's own interval, and no run is scheduled past one of the step's limits.
type WaitBackoff struct {
	// WaitBackoffFraction: a healthy wait lasts at least this fraction of the time the step has
	// been running since its first attempt [0.1]; negative turns the back-off off.
	WaitBackoffFraction float64 `envconfig:"ENGINE_WAIT_BACKOFF_FRACTION" default:"0.1"`
	// MaxWaitInterval caps a stretched interval [1m]; a step's own longer interval is kept.
	MaxWaitInterval time.Duration `envconfig:"ENGINE_MAX_WAIT_INTERVAL" default:"1m"`
	// SignaledWaitBackoffFraction and MaxSignaledWaitInterval are the same for a wait whose end
	// wakes the operation (Operation.WaitIsSignaled) [0.5, 10m]: its polls only cover a wake
	// lost to a crash between the commit and the wake. A negative fraction treats such waits
	// like the others; a negative WaitBackoffFraction turns all back-off off.
	SignaledWaitBackoffFraction float64       `envconfig:"ENGINE_SIGNALED_WAIT_BACKOFF_FRACTION" default:"0.5"`
	MaxSignaledWaitInterval     time.Duration `envconfig:"ENGINE_MAX_SIGNALED_WAIT_INTERVAL" default:"10m"`
}

func (b WaitBackoff) withDefaults() WaitBackoff {
	if b.WaitBackoffFraction == 0 {
		b.WaitBackoffFraction = 0.1
	}
	if b.MaxWaitInterval <= 0 {
		b.MaxWaitInterval = time.Minute
	}
	if b.SignaledWaitBackoffFraction == 0 {
		b.SignaledWaitBackoffFraction = 0.5
	}
	if b.MaxSignaledWaitInterval <= 0 {
		b.MaxSignaledWaitInterval = 10 * time.Minute
	}
	return b
}

// waitJitter is the largest share a stretched interval is shortened by, so that a fleet created
// within a minute does not poll in lockstep: stretched intervals grow with the time waited, and
// without it thousands of waits created together fall due in the same seconds (due-lag spikes).
const waitJitter = 0.2

// stretch is the interval of a healthy wait the step asked for after waiting so far. A stretched
// interval is shortened by up to waitJitter, by the sub-second part of waited: the time a wait
// has run is effectively random there, so waits spread without a random source, and a
// whole-second clock (tests) gets none.
func (b WaitBackoff) stretch(wait, waited time.Duration, signaled bool) time.Duration {
	if b.WaitBackoffFraction <= 0 {
		return wait
	}
	fraction, most := b.WaitBackoffFraction, b.MaxWaitInterval
	if signaled && b.SignaledWaitBackoffFraction > 0 {
		fraction, most = b.SignaledWaitBackoffFraction, b.MaxSignaledWaitInterval
	}
	if wait >= most {
		return wait
	}
	stretched := min(most, time.Duration(float64(waited)*fraction))
	if stretched <= wait {
		return wait
	}
	share := float64(waited%time.Second) / float64(time.Second)
	return max(wait, stretched-time.Duration(float64(stretched)*waitJitter*share))
}
