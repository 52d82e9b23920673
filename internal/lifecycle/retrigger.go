package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// RetriggerJob runs deprovisioning steps left executed but not completed again: each round
// it records new such operations, and for each recorded one that is due starts an operation
// of the same type in which only those steps are left to do (the others are marked done, the
// data carries what is still to remove). It goes on, RetryInterval apart, until a run
// completes them, or MaxAge after they were left: then they are orphaned resources for an
// operator (GET /info/orphans). Every decision is an event on the operation that left them.
type RetriggerJob struct {
	Store storage.Store
	Clock Clock
	Log   logrus.FieldLogger
	// RetryInterval is the wait between runs; MaxAge how long to keep trying.
	RetryInterval time.Duration
	MaxAge        time.Duration
	// OperationTimeout is each run's deadline.
	OperationTimeout time.Duration
	// EngineClock is the step engine's (runs are due at its now); the wall clock when nil.
	EngineClock Clock
	// Batch bounds one round's discoveries and runs [100].
	Batch int
}

// retriggerTypes are the operations whose not completed steps are run again.
var retriggerTypes = []string{instance.TypeDeprovision, instance.TypeSuspension}

// RoundResult counts what a round did.
type RoundResult struct {
	Found, Started, Completed, Orphaned int
}

// Round does one round.
func (j RetriggerJob) Round(ctx context.Context) (RoundResult, error) {
	var res RoundResult
	now := j.Clock.Now().UTC()
	batch := j.Batch
	if batch <= 0 {
		batch = 100
	}
	// Older origins would be orphaned at once: they are left out of the scan.
	found, err := j.Store.Lifecycle().NotCompletedOperations(ctx, retriggerTypes, now.Add(-2*j.MaxAge), batch)
	if err != nil {
		return res, err
	}
	for _, op := range found {
		r := storage.Retrigger{
			OriginID: op.ID, InstanceID: op.InstanceID, OriginType: op.Type, Steps: op.Progress.ExecutedButNotCompleted,
			State: storage.RetriggerRetrying, LastError: op.Description, NextAt: now.Add(j.RetryInterval), CreatedAt: op.UpdatedAt,
		}
		if err := j.Store.Lifecycle().InsertRetrigger(ctx, r); errors.Is(err, storage.ErrAlreadyExists) {
			continue // another replica's round recorded it
		} else if err != nil {
			return res, err
		}
		res.Found++
		j.event(ctx, r, now, fmt.Sprintf("re-trigger: steps %s not completed; running them again from %s", strings.Join(r.Steps, ", "), r.NextAt.Format(time.RFC3339)))
	}
	due, err := j.Store.Lifecycle().ListRetriggers(ctx, []string{storage.RetriggerRetrying}, &now, storage.Paging{PageSize: batch, WithoutTotal: true})
	if err != nil {
		return res, err
	}
	for _, r := range due.Items {
		outcome, err := j.advance(ctx, r, now)
		if err != nil {
			return res, fmt.Errorf("re-trigger of operation %s: %w", r.OriginID, err)
		}
		switch outcome {
		case storage.RetriggerCompleted:
			res.Completed++
		case storage.RetriggerOrphaned:
			res.Orphaned++
		case "started":
			res.Started++
		}
	}
	return res, nil
}

// advance moves one due re-trigger on: it reads the outcome of its last run, then completes,
// orphans or runs it again.
func (j RetriggerJob) advance(ctx context.Context, r storage.Retrigger, now time.Time) (string, error) {
	lc := j.Store.Lifecycle()
	log := j.Log.WithFields(logrus.Fields{"operation_id": r.OriginID, "instance_id": r.InstanceID})
	if r.LastOperationID != "" {
		last, err := j.Store.Operations().GetOperation(ctx, r.LastOperationID)
		if err != nil {
			return "", err
		}
		switch {
		case last.State.Active():
			r.NextAt = now.Add(j.RetryInterval)
			return "", lc.UpdateRetrigger(ctx, r)
		case last.State == storage.StateSucceeded && len(last.Progress.ExecutedButNotCompleted) == 0:
			r.State, r.Steps, r.LastError = storage.RetriggerCompleted, nil, ""
			if err := lc.UpdateRetrigger(ctx, r); err != nil {
				return "", err
			}
			j.event(ctx, r, now, fmt.Sprintf("re-trigger completed: operation %s ran the steps left not completed", last.ID))
			log.WithField("retrigger_operation_id", last.ID).Info("re-trigger completed the steps left not completed")
			return storage.RetriggerCompleted, nil
		case last.State == storage.StateSucceeded:
			r.Steps, r.LastError = last.Progress.ExecutedButNotCompleted, last.Description
		default:
			r.LastError = last.LastError
		}
	}
	if now.Sub(r.CreatedAt) >= j.MaxAge {
		return storage.RetriggerOrphaned, j.orphan(ctx, r, now, fmt.Sprintf("not completed after %s", j.MaxAge))
	}
	origin, err := j.Store.Operations().GetOperation(ctx, r.OriginID)
	if err != nil {
		return "", err
	}
	if r.OriginType == instance.TypeSuspension {
		// A resumed instance has a new runtime: another suspension would remove it.
		page, err := j.Store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: []string{r.InstanceID}, Paging: storage.Paging{PageSize: 1, WithoutTotal: true}})
		if err != nil {
			return "", err
		}
		if len(page.Items) > 0 && page.Items[0].ID != r.OriginID && page.Items[0].ID != r.LastOperationID {
			return storage.RetriggerOrphaned, j.orphan(ctx, r, now, fmt.Sprintf("the instance moved on (%s operation %s) after the suspension", page.Items[0].Type, page.Items[0].ID))
		}
	}
	op, err := j.rerun(ctx, r, origin)
	if err != nil {
		return "", err
	}
	r.Attempts++
	r.NextAt = now.Add(j.RetryInterval)
	stored, err := lc.InsertRetriggerOperation(ctx, r, op, instance.AllTypes())
	var running *storage.InProgressError
	if errors.As(err, &running) {
		// Not now: the instance runs something else.
		r.Attempts--
		return "", lc.UpdateRetrigger(ctx, r)
	}
	if err != nil {
		return "", err
	}
	j.event(ctx, r, now, fmt.Sprintf("re-trigger attempt %d: operation %s runs %s again (last error: %s)", r.Attempts, stored.ID, strings.Join(r.Steps, ", "), r.LastError))
	log.WithFields(logrus.Fields{"retrigger_operation_id": stored.ID, "steps": r.Steps, "attempt": r.Attempts}).Info("re-trigger started")
	return "started", nil
}

// rerun builds the operation that runs r's steps again: the origin's type and secrets, the
// data of the newest run (its steps clear what they removed), every other step marked done.
func (j RetriggerJob) rerun(ctx context.Context, r storage.Retrigger, origin storage.Operation) (storage.Operation, error) {
	source := origin
	if r.LastOperationID != "" {
		last, err := j.Store.Operations().GetOperation(ctx, r.LastOperationID)
		if err != nil {
			return storage.Operation{}, err
		}
		source = last
	}
	op, err := engine.NewOperation(r.OriginType, r.InstanceID, json.RawMessage(source.Data), j.OperationTimeout, engineNow(j.EngineClock))
	if err != nil {
		return storage.Operation{}, err
	}
	op.Secrets = origin.Secrets
	op.Description = fmt.Sprintf("re-trigger of operation %s: %s", r.OriginID, strings.Join(r.Steps, ", "))
	op.Progress.Steps = map[string]storage.StepProgress{}
	for name, sp := range origin.Progress.Steps {
		if sp.Done && !slices.Contains(r.Steps, name) {
			op.Progress.Steps[name] = storage.StepProgress{Done: true, Skipped: true}
		}
	}
	return op, nil
}

func (j RetriggerJob) orphan(ctx context.Context, r storage.Retrigger, now time.Time, why string) error {
	r.State = storage.RetriggerOrphaned
	if err := j.Store.Lifecycle().UpdateRetrigger(ctx, r); err != nil {
		return err
	}
	msg := fmt.Sprintf("re-trigger gave up, orphaned resources: steps %s %s (last error: %s)", strings.Join(r.Steps, ", "), why, r.LastError)
	j.event(ctx, r, now, msg)
	j.Log.WithFields(logrus.Fields{"operation_id": r.OriginID, "instance_id": r.InstanceID, "steps": r.Steps}).Warn(msg)
	return nil
}

// event records a decision on the operation that left the steps (a failed write is logged:
// the retrigger row already holds the decision).
func (j RetriggerJob) event(ctx context.Context, r storage.Retrigger, now time.Time, msg string) {
	typ := storage.EventRetrying
	if r.State == storage.RetriggerCompleted {
		typ = storage.EventSucceeded
	} else if r.State == storage.RetriggerOrphaned {
		typ = storage.EventFailed
	}
	if err := j.Store.Events().InsertEvents(ctx, storage.Event{OperationID: r.OriginID, InstanceID: r.InstanceID, Step: "Retrigger", Type: typ, Message: msg, CreatedAt: now}); err != nil {
		j.Log.WithError(err).WithField("operation_id", r.OriginID).Warn("recording a re-trigger event failed")
	}
}
