package orchestration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// PlanNames resolves plan names and IDs in both directions.
type PlanNames interface {
	PlanID(nameOrID string) (string, bool)
	PlanName(id string) string
}

// BadRequestError is a request that cannot be served as given; its message names the field.
type BadRequestError struct{ Msg string }

func (e *BadRequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &BadRequestError{Msg: fmt.Sprintf(format, args...)}
}

// Manager creates, reads, cancels and retries orchestrations; the Scheduler runs them.
type Manager struct {
	store storage.Store
	plans PlanNames
	cfg   Config
	win   window
	log   logrus.FieldLogger
	// wake nudges the scheduler of this process after a change (others find it on their poll).
	wake chan struct{}
	now  func() time.Time
}

// NewManager returns a manager; its Scheduler shares its configuration.
func NewManager(store storage.Store, plans PlanNames, cfg Config, log logrus.FieldLogger) (*Manager, error) {
	cfg, win, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := DefaultManager(store, plans, log)
	m.cfg, m.win = cfg, win
	return m, nil
}

// DefaultManager is a manager with the default configuration (which always parses).
func DefaultManager(store storage.Store, plans PlanNames, log logrus.FieldLogger) *Manager {
	cfg, win, _ := Config{}.withDefaults()
	return &Manager{store: store, plans: plans, cfg: cfg, win: win, log: log, wake: make(chan struct{}, 1), now: time.Now}
}

func (m *Manager) nudge() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Create validates p, selects the runtimes and stores the orchestration; the answer is its ID.
func (m *Manager) Create(ctx context.Context, typ string, p dto.Parameters) (string, error) {
	if err := m.validate(typ, &p); err != nil {
		return "", err
	}
	selected, skipped, err := m.selectInstances(ctx, p.Targets)
	if err != nil {
		return "", err
	}
	now := m.now().UTC()
	due := now
	switch p.Strategy.Schedule {
	case dto.ScheduleImmediate:
	case dto.ScheduleMaintenanceWindow:
		due = m.win.next(now)
	default:
		due, _ = dto.ParseTime(p.Strategy.Schedule) // validated
	}
	o := storage.Orchestration{ID: uuid.NewString(), Type: typ, State: dto.Pending, CreatedAt: now}
	rowState, rowDesc := storage.OrchOpPending, ""
	switch {
	case len(selected) == 0:
		o.State, o.Description = dto.Succeeded, "no runtimes matched the targets"
	case p.DryRun:
		o.State, o.Description = dto.Succeeded, fmt.Sprintf("dry run: %d runtimes would be upgraded", len(selected))
		rowState, rowDesc = storage.OrchOpSucceeded, "dry run: not upgraded"
	default:
		o.Description = fmt.Sprintf("%d runtimes scheduled from %s", len(selected), due.Format(time.RFC3339))
	}
	if skipped > 0 {
		o.Description += fmt.Sprintf("; %d matching instances have no runtime yet and are not upgraded", skipped)
	}
	if o.Parameters, err = json.Marshal(p); err != nil {
		return "", fmt.Errorf("encoding the orchestration's parameters: %w", err)
	}
	rows := make([]storage.OrchestrationOperation, len(selected))
	for i, inst := range selected {
		rows[i] = storage.OrchestrationOperation{
			InstanceID: inst.InstanceID, RuntimeID: inst.RuntimeID, GlobalAccountID: inst.GlobalAccountID, SubAccountID: inst.SubAccountID,
			Region: inst.ProviderRegion, PlanID: inst.PlanID, OperationID: uuid.NewString(), StoredState: rowState, Description: rowDesc, DueAt: due,
		}
	}
	if _, err := m.store.Orchestrations().InsertOrchestration(ctx, o, rows); err != nil {
		return "", err
	}
	m.log.WithFields(logrus.Fields{"orchestration_id": o.ID, "type": typ, "runtimes": len(rows), "dry_run": p.DryRun}).Info("orchestration created")
	m.nudge()
	return o.ID, nil
}

func (m *Manager) validate(typ string, p *dto.Parameters) error {
	switch typ {
	case dto.UpgradeKyma:
		if p.Kyma == nil {
			return badRequest("kyma.version: is required")
		}
		if err := dto.CheckVersion("kyma.version", p.Kyma.Version); err != nil {
			return badRequest("%s", err.Error())
		}
		if p.Kubernetes != nil {
			return badRequest("kubernetes: not allowed in a Kyma upgrade (POST /upgrade/cluster upgrades clusters)")
		}
	case dto.UpgradeCluster:
		if p.Kubernetes == nil || (p.Kubernetes.KubernetesVersion == "" && p.Kubernetes.MachineImageVersion == "") {
			return badRequest("kubernetes.kubernetesVersion: is required (or kubernetes.machineImageVersion)")
		}
		for _, f := range []struct{ field, v string }{
			{"kubernetes.kubernetesVersion", p.Kubernetes.KubernetesVersion}, {"kubernetes.machineImageVersion", p.Kubernetes.MachineImageVersion},
		} {
			if f.v == "" {
				continue
			}
			if err := dto.CheckVersion(f.field, f.v); err != nil {
				return badRequest("%s", err.Error())
			}
		}
		if p.Kyma != nil {
			return badRequest("kyma: not allowed in a cluster upgrade (POST /upgrade/kyma upgrades Kyma)")
		}
	default:
		return badRequest("type: unknown orchestration type %q", typ)
	}
	if err := m.validateTargets(p.Targets); err != nil {
		return err
	}
	s := &p.Strategy
	if s.Type == "" {
		s.Type = dto.StrategyParallel
	}
	if s.Type != dto.StrategyParallel {
		return badRequest("strategy.type: must be %q, got %q", dto.StrategyParallel, s.Type)
	}
	if s.Parallel.Workers == 0 {
		s.Parallel.Workers = 1
	}
	if s.Parallel.Workers < 1 || s.Parallel.Workers > m.cfg.MaxWorkers {
		return badRequest("strategy.parallel.workers: must be from 1 to %d, got %d", m.cfg.MaxWorkers, s.Parallel.Workers)
	}
	switch s.Schedule {
	case "":
		s.Schedule = dto.ScheduleImmediate
	case dto.ScheduleImmediate, dto.ScheduleMaintenanceWindow:
	default:
		if _, err := dto.ParseTime(s.Schedule); err != nil {
			return badRequest("strategy.schedule: must be %q, %q or an RFC 3339 time, got %q (%v)", dto.ScheduleImmediate, dto.ScheduleMaintenanceWindow, s.Schedule, err)
		}
	}
	return nil
}

// maxTargetField bounds each selector (IDs and names are far shorter); maxTargets the targets of
// each list (each include target is one query).
const (
	maxTargetField = 256
	maxTargets     = 100
)

func (m *Manager) validateTargets(t dto.TargetSpec) error {
	if len(t.Include) == 0 {
		return badRequest("targets.include: at least one target is required")
	}
	for name, list := range map[string][]dto.Target{"include": t.Include, "exclude": t.Exclude} {
		if len(list) > maxTargets {
			return badRequest("targets.%s: at most %d targets, got %d", name, maxTargets, len(list))
		}
		for i, tg := range list {
			field := fmt.Sprintf("targets.%s[%d]", name, i)
			if tg.Target != "" && tg.Target != dto.TargetAll {
				return badRequest("%s.target: must be %q, got %q", field, dto.TargetAll, tg.Target)
			}
			if tg == (dto.Target{}) {
				return badRequest("%s: set target %q or at least one of globalAccount, subAccount, runtimeID, instanceID, region, planName", field, dto.TargetAll)
			}
			for _, v := range []string{tg.GlobalAccount, tg.SubAccount, tg.RuntimeID, tg.InstanceID, tg.Region, tg.PlanName} {
				if len(v) > maxTargetField {
					return badRequest("%s: a selector is longer than %d characters", field, maxTargetField)
				}
			}
			if tg.PlanName != "" {
				if _, ok := m.plans.PlanID(tg.PlanName); !ok {
					return badRequest("%s.planName: unknown plan %q", field, tg.PlanName)
				}
			}
		}
	}
	return nil
}

// selectInstances lists the live instances an include target matches (each target's fields
// filter in the database) and no exclude target does, in creation order; skipped counts the
// matches without a runtime yet.
func (m *Manager) selectInstances(ctx context.Context, t dto.TargetSpec) (selected []storage.Instance, skipped int, err error) {
	seen := map[string]bool{}
	for _, tg := range t.Include {
		f := storage.InstanceFilter{}
		add := func(into *[]string, v string) {
			if v != "" {
				*into = append(*into, v)
			}
		}
		add(&f.GlobalAccountIDs, tg.GlobalAccount)
		add(&f.SubAccountIDs, tg.SubAccount)
		add(&f.RuntimeIDs, tg.RuntimeID)
		add(&f.InstanceIDs, tg.InstanceID)
		add(&f.Regions, tg.Region)
		if tg.PlanName != "" {
			id, _ := m.plans.PlanID(tg.PlanName)
			f.PlanIDs = []string{id}
		}
		for p := 1; ; p++ {
			f.Paging = storage.Paging{Page: p, PageSize: 1000}
			page, err := m.store.Instances().ListInstances(ctx, f)
			if err != nil {
				return nil, 0, fmt.Errorf("selecting runtimes: %w", err)
			}
			for _, inst := range page.Items {
				if seen[inst.InstanceID] || m.matchesAny(inst, t.Exclude) {
					continue
				}
				seen[inst.InstanceID] = true
				if inst.RuntimeID == "" {
					skipped++
					continue
				}
				selected = append(selected, inst)
			}
			if p*1000 >= page.TotalCount {
				break
			}
		}
	}
	slices.SortStableFunc(selected, func(a, b storage.Instance) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return selected, skipped, nil
}

func (m *Manager) matchesAny(inst storage.Instance, targets []dto.Target) bool {
	for _, t := range targets {
		// "all" adds no condition of its own: with other fields given, they must all match too.
		if (t.InstanceID == "" || t.InstanceID == inst.InstanceID) && (t.RuntimeID == "" || t.RuntimeID == inst.RuntimeID) &&
			(t.GlobalAccount == "" || t.GlobalAccount == inst.GlobalAccountID) && (t.SubAccount == "" || t.SubAccount == inst.SubAccountID) &&
			(t.Region == "" || t.Region == inst.ProviderRegion) && (t.PlanName == "" || t.PlanName == m.plans.PlanName(inst.PlanID)) {
			return true
		}
	}
	return false
}

// Get returns the orchestration with its operation counts.
func (m *Manager) Get(ctx context.Context, id string) (dto.StatusResponse, error) {
	o, err := m.store.Orchestrations().GetOrchestration(ctx, id)
	if err != nil {
		return dto.StatusResponse{}, err
	}
	return m.status(ctx, o)
}

func (m *Manager) status(ctx context.Context, o storage.Orchestration) (dto.StatusResponse, error) {
	counts, err := m.store.Orchestrations().CountOrchestrationOperations(ctx, o.ID)
	if err != nil {
		return dto.StatusResponse{}, err
	}
	stats := map[string]int{}
	for _, s := range dto.OperationStates {
		stats[s] = counts[s]
	}
	out := dto.StatusResponse{OrchestrationID: o.ID, Type: o.Type, State: o.State, Description: o.Description,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, OperationStats: stats}
	if err := json.Unmarshal(o.Parameters, &out.Parameters); err != nil {
		return dto.StatusResponse{}, fmt.Errorf("decoding the parameters of orchestration %s: %w", o.ID, err)
	}
	return out, nil
}

// List returns a page of orchestrations, newest first.
func (m *Manager) List(ctx context.Context, states []string, paging storage.Paging) (dto.StatusResponseList, error) {
	for _, s := range states {
		if !slices.Contains(dto.States, s) {
			return dto.StatusResponseList{}, badRequest("state: unknown state %q (%s)", s, strings.Join(dto.States, ", "))
		}
	}
	page, err := m.store.Orchestrations().ListOrchestrations(ctx, storage.OrchestrationFilter{States: states, Paging: paging})
	if err != nil {
		return dto.StatusResponseList{}, err
	}
	out := dto.StatusResponseList{Data: []dto.StatusResponse{}, TotalCount: page.TotalCount}
	for _, o := range page.Items {
		st, err := m.status(ctx, o)
		if err != nil {
			return dto.StatusResponseList{}, err
		}
		out.Data = append(out.Data, st)
	}
	out.Count = len(out.Data)
	return out, nil
}

// operationStates are the states an orchestration's operation can show.
var operationStates = dto.OperationStates

// Operations returns a page of the orchestration's operations.
func (m *Manager) Operations(ctx context.Context, id string, states []string, paging storage.Paging) (dto.OperationResponseList, error) {
	for _, s := range states {
		if !slices.Contains(operationStates, s) {
			return dto.OperationResponseList{}, badRequest("state: unknown operation state %q (%s)", s, strings.Join(operationStates, ", "))
		}
	}
	o, err := m.store.Orchestrations().GetOrchestration(ctx, id)
	if err != nil {
		return dto.OperationResponseList{}, err
	}
	page, err := m.store.Orchestrations().ListOrchestrationOperations(ctx, id, storage.OrchestrationOperationFilter{States: states, Paging: paging})
	if err != nil {
		return dto.OperationResponseList{}, err
	}
	out := dto.OperationResponseList{Data: make([]dto.OperationResponse, 0, len(page.Items)), Count: len(page.Items), TotalCount: page.TotalCount}
	for _, op := range page.Items {
		out.Data = append(out.Data, m.operation(o, op))
	}
	return out, nil
}

func (m *Manager) operation(o storage.Orchestration, op storage.OrchestrationOperation) dto.OperationResponse {
	var p dto.Parameters
	_ = json.Unmarshal(o.Parameters, &p) // written by Create
	return dto.OperationResponse{
		OperationID: op.OperationID, OrchestrationID: o.ID, Type: o.Type, InstanceID: op.InstanceID, RuntimeID: op.RuntimeID,
		GlobalAccountID: op.GlobalAccountID, SubAccountID: op.SubAccountID, Region: op.Region, ServicePlanID: op.PlanID,
		ServicePlanName: m.plans.PlanName(op.PlanID), State: op.State, Description: op.Description, DryRun: p.DryRun,
		Attempts: op.Attempts, ScheduledAt: op.DueAt, StartedAt: op.StartedAt, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
	}
}

// Operation returns one operation of the orchestration with its steps and events.
func (m *Manager) Operation(ctx context.Context, id, opID string) (dto.OperationDetailResponse, error) {
	o, err := m.store.Orchestrations().GetOrchestration(ctx, id)
	if err != nil {
		return dto.OperationDetailResponse{}, err
	}
	row, err := m.store.Orchestrations().GetOrchestrationOperation(ctx, id, opID)
	if err != nil {
		return dto.OperationDetailResponse{}, err
	}
	out := dto.OperationDetailResponse{OperationResponse: m.operation(o, row), Steps: []dto.StepResponse{}, Events: []dto.EventResponse{}}
	if row.StoredState != storage.OrchOpStarted {
		return out, nil
	}
	op, err := m.store.Operations().GetOperation(ctx, opID)
	if err != nil {
		return dto.OperationDetailResponse{}, err
	}
	out.Stage, out.FinishedStages, out.LastError = op.Stage, op.Progress.FinishedStages, op.LastError
	if op.Description != "" {
		out.Description = op.Description
	}
	for name, sp := range op.Progress.Steps {
		out.Steps = append(out.Steps, dto.StepResponse{Name: name, Attempts: sp.Attempts, Done: sp.Done, Skipped: sp.Skipped, FirstAttempt: sp.FirstAttempt, LastError: sp.LastError})
	}
	slices.SortFunc(out.Steps, func(a, b dto.StepResponse) int {
		if c := a.FirstAttempt.Compare(b.FirstAttempt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for p := 1; ; p++ {
		page, err := m.store.Events().ListEvents(ctx, storage.EventFilter{OperationIDs: []string{opID}, Paging: storage.Paging{Page: p, PageSize: 1000}})
		if err != nil {
			return dto.OperationDetailResponse{}, err
		}
		for _, e := range page.Items {
			out.Events = append(out.Events, dto.EventResponse{Step: e.Step, Type: string(e.Type), Message: e.Message, DurationMS: e.Duration.Milliseconds(), CreatedAt: e.CreatedAt})
		}
		if p*1000 >= page.TotalCount {
			return out, nil
		}
	}
}

// Cancel cancels the operations not started; running ones finish.
func (m *Manager) Cancel(ctx context.Context, id string) (dto.CancelResponse, error) {
	res, err := m.store.Orchestrations().CancelOrchestration(ctx, id)
	if err != nil {
		return dto.CancelResponse{}, err
	}
	m.log.WithFields(logrus.Fields{"orchestration_id": id, "canceled": res.Canceled, "state": res.State}).Info("orchestration canceled")
	m.nudge()
	return dto.CancelResponse{OrchestrationID: id, State: res.State, Canceled: res.Canceled}, nil
}

// Retry queues the failed operations (or the listed ones) again.
func (m *Manager) Retry(ctx context.Context, id string, operationIDs []string) (dto.RetryResponse, error) {
	retried, err := m.store.Orchestrations().RetryOrchestration(ctx, id, operationIDs, uuid.NewString, m.now())
	var invalid *storage.InvalidRetryError
	if errors.As(err, &invalid) {
		return dto.RetryResponse{}, badRequest("%s", invalid.Reason)
	}
	if err != nil {
		return dto.RetryResponse{}, err
	}
	m.log.WithFields(logrus.Fields{"orchestration_id": id, "retried": len(retried)}).Info("orchestration retried")
	m.nudge()
	return dto.RetryResponse{OrchestrationID: id, RetriedOperations: retried, Message: fmt.Sprintf("retrying %d failed operations", len(retried))}, nil
}
