package orchestration

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// LockName is the singleton lock the scheduler holds while it runs.
const LockName = "orchestration-scheduler"

// unfinished are the orchestration states the scheduler works on.
var unfinished = []string{dto.Pending, dto.InProgress, dto.Retrying, dto.Canceling}

// Scheduler starts the due upgrades of unfinished orchestrations. Run it in every replica: one
// at a time holds the lock and works; the others wait to take over.
type Scheduler struct {
	m   *Manager
	log logrus.FieldLogger
	// OnLead, when set, is called with true when this scheduler takes the lock and false when
	// it gives it up (tests observe leadership with it).
	OnLead func(bool)
}

// Scheduler returns the scheduler of the manager's orchestrations.
func (m *Manager) Scheduler() *Scheduler {
	return &Scheduler{m: m, log: m.log.WithField("component", "orchestration-scheduler")}
}

// Run schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		lock, ok, err := s.m.store.TryLock(ctx, LockName)
		if err != nil {
			s.log.WithError(err).Warn("taking the scheduler lock failed; trying again")
		}
		if ok {
			s.log.Info("scheduling orchestrations in this replica")
			s.lead(ctx, lock)
			lock.Release()
			if ctx.Err() != nil {
				return nil
			}
			s.log.Warn("lost the scheduler lock; another replica may take over")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.m.cfg.LockRetryInterval):
		}
	}
}

// lead schedules while the lock is held.
func (s *Scheduler) lead(ctx context.Context, lock storage.SingletonLock) {
	if s.OnLead != nil {
		s.OnLead(true)
		defer s.OnLead(false)
	}
	// A lock lost (its lease not renewed in time: this replica hung or lost the database) ends
	// the work under way too, so a replica that resumes starts nothing the new holder starts.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-lock.Lost():
			stop()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(s.m.cfg.PollInterval)
	defer t.Stop()
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.log.WithError(err).Error("scheduling orchestrations failed; trying again on the next poll")
		}
		select {
		case <-ctx.Done():
			return
		case <-lock.Lost():
			return
		case <-t.C:
		case <-s.m.wake:
		}
	}
}

// Tick works once on every unfinished orchestration, oldest first.
func (s *Scheduler) Tick(ctx context.Context) error {
	var errs []error
	for p := 1; ; p++ {
		page, err := s.m.store.Orchestrations().ListOrchestrations(ctx, storage.OrchestrationFilter{States: unfinished, Paging: storage.Paging{Page: p, PageSize: 100}})
		if err != nil {
			return err
		}
		for _, o := range page.Items {
			if err := s.advance(ctx, o); err != nil {
				errs = append(errs, fmt.Errorf("orchestration %s: %w", o.ID, err))
			}
		}
		if p*100 >= page.TotalCount {
			return errors.Join(errs...)
		}
	}
}

// advance starts what is due within the orchestration's workers and records its end.
func (s *Scheduler) advance(ctx context.Context, o storage.Orchestration) error {
	log := s.log.WithField("orchestration_id", o.ID)
	st, err := s.m.status(ctx, o)
	if err != nil {
		return err
	}
	if o.State != dto.Canceling {
		if err := s.startDue(ctx, o, st.Parameters, log); err != nil {
			return err
		}
		if st, err = s.m.status(ctx, o); err != nil {
			return err
		}
	}
	c := st.OperationStats
	if c[dto.Pending]+c[dto.Retrying]+c[dto.InProgress] > 0 {
		return nil
	}
	// Skipped rows (deprovisioned instances) are neither failures nor in the way of success.
	state, desc := dto.Succeeded, fmt.Sprintf("%d succeeded, %d skipped", c[dto.Succeeded], c[dto.Skipped])
	switch {
	case o.State == dto.Canceling:
		state, desc = dto.Canceled, fmt.Sprintf("canceled: %d succeeded, %d failed, %d skipped, %d canceled", c[dto.Succeeded], c[dto.Failed], c[dto.Skipped], c[dto.Canceled])
	case c[dto.Failed] > 0:
		state, desc = dto.Failed, fmt.Sprintf("%d succeeded, %d failed, %d skipped", c[dto.Succeeded], c[dto.Failed], c[dto.Skipped])
	}
	err = s.m.store.Orchestrations().SetOrchestrationState(ctx, o.ID, []string{o.State}, state, desc)
	if errors.Is(err, storage.ErrConflict) {
		return nil // moved meanwhile (canceled, retried): the next tick sees it
	}
	if err == nil {
		log.WithFields(logrus.Fields{"state": state, "description": desc}).Info("orchestration finished")
	}
	return err
}

// startDue starts due operations until the orchestration's workers are busy.
func (s *Scheduler) startDue(ctx context.Context, o storage.Orchestration, p dto.Parameters, log logrus.FieldLogger) error {
	workers := p.Strategy.Parallel.Workers
	for {
		now := s.m.now()
		due, err := s.m.store.Orchestrations().DueOrchestrationOperations(ctx, o.ID, now, workers)
		if err != nil || len(due) == 0 {
			return err
		}
		for _, row := range due {
			err := s.start(ctx, o, p, row, now, log)
			if errors.Is(err, storage.ErrWorkersBusy) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
}

// start starts one runtime's upgrade, or defers it saying why.
func (s *Scheduler) start(ctx context.Context, o storage.Orchestration, p dto.Parameters, row storage.OrchestrationOperation, now time.Time, log logrus.FieldLogger) error {
	log = log.WithFields(logrus.Fields{"instance_id": row.InstanceID, "operation_id": row.OperationID})
	orchs := s.m.store.Orchestrations()
	if p.Strategy.Schedule == dto.ScheduleMaintenanceWindow && !s.m.win.contains(now) {
		next := s.m.win.next(now)
		return orchs.DeferOrchestrationOperation(ctx, o.ID, row.InstanceID, row.OperationID, next,
			"waiting for the maintenance window "+s.m.cfg.MaintenanceWindow+" UTC from "+next.Format(time.RFC3339), false)
	}
	// Whether the instance is deprovisioned is decided by StartOrchestrationOperation, under the
	// lock that accepting a deprovisioning takes: a check here could be overtaken.
	var data any
	switch o.Type {
	case dto.UpgradeKyma:
		data = instance.UpgradeKymaData{KymaVersion: p.Kyma.Version}
	case dto.UpgradeCluster:
		data = instance.UpgradeClusterData{KubernetesVersion: p.Kubernetes.KubernetesVersion, MachineImageVersion: p.Kubernetes.MachineImageVersion}
	default:
		return fmt.Errorf("unknown orchestration type %q", o.Type)
	}
	op, err := engine.NewOperation(o.Type, row.InstanceID, data, s.m.cfg.UpgradeTimeout, now)
	if err != nil {
		return err
	}
	op.ID = row.OperationID
	op.Description = "upgrade of orchestration " + o.ID
	_, err = orchs.StartOrchestrationOperation(ctx, o.ID, op, p.Strategy.Parallel.Workers, instance.AllTypes())
	var (
		busy    *storage.InProgressError
		skipped *storage.SkippedError
	)
	switch {
	case err == nil:
		log.Info("upgrade started")
		return nil
	case errors.As(err, &skipped):
		log.WithFields(logrus.Fields{"deprovisioning_id": skipped.DeprovisioningID, "reason": skipped.Reason}).Info("instance deprovisioned; upgrade skipped")
		return nil
	case errors.As(err, &busy):
		next := now.Add(s.m.cfg.BusyRetryInterval)
		desc := fmt.Sprintf("instance busy: %s operation %s is in progress; trying again at %s", busy.Operation.Type, busy.Operation.ID, next.Format(time.RFC3339))
		log.WithField("busy_with", busy.Operation.ID).Info("instance busy; upgrade deferred")
		return orchs.DeferOrchestrationOperation(ctx, o.ID, row.InstanceID, row.OperationID, next, desc, false)
	case errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
		return nil // canceled or retried meanwhile
	default:
		return err
	}
}
