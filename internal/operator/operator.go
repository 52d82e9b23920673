// Package operator serves the runbook endpoints operators use: GET /runtimes (KEB's filters
// and paging), GET /events, and POST /upgrade/kyma and /upgrade/cluster, which store one
// upgrade operation per selected runtime for the step engine to run.
package operator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// PlanNames resolves plan names and IDs in both directions.
type PlanNames interface {
	// PlanID returns the ID of a plan given by name or ID.
	PlanID(nameOrID string) (string, bool)
	PlanName(id string) string
}

// Handler serves /runtimes, /events, /upgrade and /orchestrations.
type Handler struct {
	store storage.Store
	plans PlanNames
	log   logrus.FieldLogger
	mux   *http.ServeMux
	orch  *orchestration.Manager
}

// New returns the operator handler.
func New(store storage.Store, plans PlanNames, log logrus.FieldLogger, opts ...Option) *Handler {
	h := &Handler{store: store, plans: plans, log: log, mux: http.NewServeMux()}
	for _, o := range opts {
		o(h)
	}
	if h.orch == nil {
		h.orch = orchestration.DefaultManager(store, plans, log)
	}
	h.mux.HandleFunc("GET /runtimes", h.runtimes)
	h.mux.HandleFunc("GET /events", h.events)
	h.mux.HandleFunc("POST /upgrade/kyma", h.upgradeKyma)
	h.mux.HandleFunc("POST /upgrade/cluster", h.upgradeCluster)
	h.routeOrchestrations()
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// states of a runtime as GET /runtimes reports and filters them.
var states = map[string]bool{"provisioning": true, "provisioned": true, "failed": true, "updating": true, "deprovisioning": true, "deprovisioned": true}

func (h *Handler) runtimes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("shoot") != "" {
		writeError(w, http.StatusBadRequest, "shoot: filtering by shoot name is not supported; filter by runtime_id")
		return
	}
	page, size, err := paging(q.Get("page"), q.Get("page_size"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f := storage.InstanceFilter{
		GlobalAccountIDs: list(q, "account"), SubAccountIDs: list(q, "subaccount"), InstanceIDs: list(q, "instance_id"),
		RuntimeIDs: list(q, "runtime_id"), Regions: list(q, "region"), IncludeDeleted: true,
	}
	for _, p := range list(q, "plan") {
		id, ok := h.plans.PlanID(p)
		if !ok {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("plan: unknown plan %q", p))
			return
		}
		f.PlanIDs = append(f.PlanIDs, id)
	}
	wantStates := list(q, "state")
	for _, s := range wantStates {
		if !states[s] {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("state: unknown state %q (provisioning, provisioned, failed, updating, deprovisioning, deprovisioned)", s))
			return
		}
	}
	if len(wantStates) == 0 {
		f.Page, f.PageSize = page, size
		res, err := h.store.Instances().ListInstances(r.Context(), f)
		if err != nil {
			h.fail(w, err)
			return
		}
		dtos, err := h.dtos(r, res.Items)
		if err != nil {
			h.fail(w, err)
			return
		}
		writeJSON(w, runtime.Page{Data: dtos, Count: len(dtos), TotalCount: res.TotalCount})
		return
	}
	// The state is derived from operations: filter every match, then page.
	var all []runtime.DTO
	for p := 1; ; p++ {
		f.Page, f.PageSize = p, 1000
		res, err := h.store.Instances().ListInstances(r.Context(), f)
		if err != nil {
			h.fail(w, err)
			return
		}
		dtos, err := h.dtos(r, res.Items)
		if err != nil {
			h.fail(w, err)
			return
		}
		for _, d := range dtos {
			if slices.Contains(wantStates, d.Status.State) {
				all = append(all, d)
			}
		}
		if p*1000 >= res.TotalCount {
			break
		}
	}
	start, end := min((page-1)*size, len(all)), min(page*size, len(all))
	writeJSON(w, runtime.Page{Data: append([]runtime.DTO{}, all[start:end]...), Count: end - start, TotalCount: len(all)})
}

func (h *Handler) dtos(r *http.Request, items []storage.Instance) ([]runtime.DTO, error) {
	byInstance, err := h.operationsOf(r, items)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.DTO, 0, len(items))
	for _, inst := range items {
		ops := byInstance[inst.InstanceID]
		d := runtime.DTO{
			InstanceID: inst.InstanceID, RuntimeID: inst.RuntimeID, GlobalAccountID: inst.GlobalAccountID, SubAccountID: inst.SubAccountID,
			ProviderRegion: inst.ProviderRegion, ServiceID: inst.ServiceID, ServicePlanID: inst.PlanID, ServicePlanName: h.plans.PlanName(inst.PlanID),
			DashboardURL: inst.DashboardURL, Parameters: inst.Parameters,
			Status: runtime.Status{CreatedAt: inst.CreatedAt, ModifiedAt: inst.UpdatedAt, DeletedAt: inst.DeletedAt},
		}
		for _, op := range ops { // newest first: keep the first of each type
			dto := &runtime.Operation{OperationID: op.ID, Type: op.Type, State: string(op.State), Description: op.Description, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt}
			if op.State == storage.StateFailed {
				dto.Description = op.LastError
			}
			switch {
			case op.Type == instance.TypeProvision && d.Status.Provisioning == nil:
				d.Status.Provisioning = dto
			case op.Type == instance.TypeDeprovision && d.Status.Deprovisioning == nil:
				d.Status.Deprovisioning = dto
			case op.Type == instance.TypeUpdate && d.Status.Update == nil:
				d.Status.Update = dto
			}
		}
		d.Status.State = state(inst, ops)
		out = append(out, d)
	}
	return out, nil
}

// operationsOf reads the operations of a page of instances in one query per 1000 operations
// (not one per instance), grouped by instance, newest first.
func (h *Handler) operationsOf(r *http.Request, items []storage.Instance) (map[string][]storage.Operation, error) {
	out := make(map[string][]storage.Operation, len(items))
	if len(items) == 0 {
		return out, nil
	}
	ids := make([]string, len(items))
	for i, inst := range items {
		ids[i] = inst.InstanceID
	}
	for p := 1; ; p++ {
		page, err := h.store.Operations().ListOperations(r.Context(), storage.OperationFilter{InstanceIDs: ids, Paging: storage.Paging{Page: p, PageSize: 1000}})
		if err != nil {
			return nil, err
		}
		for _, op := range page.Items {
			out[op.InstanceID] = append(out[op.InstanceID], op)
		}
		if p*1000 >= page.TotalCount {
			return out, nil
		}
	}
}

// state derives a runtime's state from its newest operation.
func state(inst storage.Instance, newestFirst []storage.Operation) string {
	if inst.DeletedAt != nil {
		return "deprovisioned"
	}
	if len(newestFirst) == 0 {
		return "provisioning"
	}
	op := newestFirst[0]
	switch {
	case op.Type == instance.TypeDeprovision && op.State.Active():
		return "deprovisioning"
	case op.Type == instance.TypeUpdate && op.State.Active():
		return "updating"
	case op.Type == instance.TypeProvision && op.State.Active():
		return "provisioning"
	case op.State == storage.StateFailed:
		return "failed"
	}
	return "provisioned"
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := storage.EventFilter{InstanceIDs: list(q, "instance_ids"), OperationIDs: list(q, "operation_ids")}
	if len(f.InstanceIDs) == 0 && len(f.OperationIDs) == 0 {
		writeError(w, http.StatusBadRequest, "instance_ids or operation_ids is required")
		return
	}
	out := []runtime.Event{}
	for p := 1; ; p++ {
		f.Page, f.PageSize = p, 1000
		res, err := h.store.Events().ListEvents(r.Context(), f)
		if err != nil {
			h.fail(w, err)
			return
		}
		for _, e := range res.Items {
			out = append(out, runtime.Event{
				OperationID: e.OperationID, InstanceID: e.InstanceID, Step: e.Step, Type: string(e.Type), Message: e.Message,
				DurationMS: e.Duration.Milliseconds(), WaitMS: e.Wait.Milliseconds(), CreatedAt: e.CreatedAt,
			})
		}
		if p*1000 >= res.TotalCount {
			break
		}
	}
	writeJSON(w, out)
}

// maxPage bounds page so that the offset stays far below 2^31 for every page size.
const maxPage = 1_000_000

func paging(pageRaw, sizeRaw string) (int, int, error) {
	page, size := 1, 100
	var err error
	if pageRaw != "" {
		if page, err = strconv.Atoi(pageRaw); err != nil || page < 1 {
			return 0, 0, fmt.Errorf("page: must be a positive integer, got %q", pageRaw)
		}
	}
	if sizeRaw != "" {
		if size, err = strconv.Atoi(sizeRaw); err != nil || size < 1 || size > 1000 {
			return 0, 0, fmt.Errorf("page_size: must be an integer from 1 to 1000, got %q", sizeRaw)
		}
	}
	// The offset (page-1)*size must fit the databases' integers; no fleet has that many runtimes.
	if page > maxPage {
		return 0, 0, fmt.Errorf("page: must be at most %d, got %q", maxPage, pageRaw)
	}
	return page, size, nil
}

// list reads a filter given repeated (?a=1&a=2) or comma-separated (?a=1,2).
func list(q map[string][]string, key string) []string {
	var out []string
	for _, v := range q[key] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func (h *Handler) fail(w http.ResponseWriter, err error) {
	if storage.IsUnavailable(err) {
		h.log.WithError(err).Warn("operator request refused: database unavailable")
		health.RetryLater(w)
		writeError(w, http.StatusServiceUnavailable, health.UnavailableMessage)
		return
	}
	h.log.WithError(err).Error("operator request failed")
	writeError(w, http.StatusInternalServerError, "internal error, see the broker's log")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
