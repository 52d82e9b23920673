// Package operator serves the runbook endpoints operators use: GET /runtimes (KEB's filters,
// filtered and paged in the database), GET /events, POST /upgrade/kyma and /upgrade/cluster,
// PUT /expire/service_instance/{id}, GET /kubeconfig/{id}, GET /info/runtimes and
// GET /info/orphans.
package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/lifecycle"
	"github.com/kyma-project/kyma-environment-broker/internal/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
	"github.com/sirupsen/logrus"
)

// PlanNames resolves plan names and IDs in both directions.
type PlanNames interface {
	// PlanID returns the ID of a plan given by name or ID.
	PlanID(nameOrID string) (string, bool)
	PlanName(id string) string
}

// Handler serves the operator API: /runtimes, /events, /upgrade/..., /orchestrations...,
// /expire/..., /kubeconfig/..., /info/....
type Handler struct {
	store storage.Store
	plans PlanNames
	log   logrus.FieldLogger
	mux   *http.ServeMux
	// provisioner reads kubeconfigs and runtime configurations (nil: those answer 503).
	provisioner client.Client
	expirer     lifecycle.Expirer
	clock       lifecycle.Clock
	orch        *orchestration.Manager
	// patterns are the routes as registered ("GET /runtimes"), for the API description's test.
	patterns []string
}

// WithProvisioner lets the handler read kubeconfigs and runtime configurations.
func WithProvisioner(p client.Client) Option { return func(h *Handler) { h.provisioner = p } }

// WithExpirer serves PUT /expire/service_instance/{id} and the expiry times of GET /runtimes.
func WithExpirer(x lifecycle.Expirer) Option { return func(h *Handler) { h.expirer = x } }

// WithClock sets the handler's time (expiries); tests use a controllable one.
func WithClock(c lifecycle.Clock) Option { return func(h *Handler) { h.clock = c } }

// New returns the operator handler.
func New(store storage.Store, plans PlanNames, log logrus.FieldLogger, opts ...Option) *Handler {
	h := &Handler{store: store, plans: plans, log: log, mux: http.NewServeMux(), clock: lifecycle.WallClock()}
	for _, o := range opts {
		o(h)
	}
	if h.expirer.Store == nil {
		h.expirer.Store = store
	}
	if h.orch == nil {
		h.orch = orchestration.DefaultManager(store, plans, log)
	}
	h.handle("GET /runtimes", h.runtimes)
	h.handle("GET /events", h.events)
	h.handle("POST /upgrade/kyma", h.upgradeKyma)
	h.handle("POST /upgrade/cluster", h.upgradeCluster)
	h.handle("PUT /expire/service_instance/{id}", h.expire)
	h.handle("GET /kubeconfig/{id}", h.kubeconfig)
	h.handle("GET /info/runtimes", h.infoRuntimes)
	h.handle("GET /info/orphans", h.orphans)
	h.routeOrchestrations()
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// handle registers a route and records its pattern.
func (h *Handler) handle(pattern string, f http.HandlerFunc) {
	h.patterns = append(h.patterns, pattern)
	h.mux.HandleFunc(pattern, f)
}

// Routes are the handler's routes as "METHOD /path/{param}".
func (h *Handler) Routes() []string { return slices.Clone(h.patterns) }

// runtimeParams are the query parameters GET /runtimes knows; others are refused by name.
var runtimeParams = []string{"account", "subaccount", "instance_id", "runtime_id", "region", "shoot", "plan", "state",
	"op_detail", "kyma_config", "cluster_config", "connection_status", "expired", "expires_within", "sort", "order", "page", "page_size"}

// stateExpired is the state filter for expired instances (they are suspended or being so).
const stateExpired = "expired"

// shootName is what a shoot (cluster) name may be; it is matched inside stored JSON, so no
// pattern characters get through.
var shootName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// maxFilterValues bounds each list filter (the values become query parameters).
const (
	maxFilterValues = 100
	maxValueLength  = 256
)

// maxExpiresWithin bounds expires_within (no plan lives longer).
const maxExpiresWithin = 366 * 24 * time.Hour

// runtimeRequest is GET /runtimes's query, validated.
type runtimeRequest struct {
	q                                       storage.RuntimeQuery
	allOps, kymaCfg, clusterCfg, connection bool
}

// fromProvisioner tells whether the request needs the provisioner's view of each runtime.
func (r runtimeRequest) fromProvisioner() bool { return r.kymaCfg || r.clusterCfg || r.connection }

func (h *Handler) parseRuntimes(q url.Values) (runtimeRequest, error) {
	var out runtimeRequest
	if err := onlyParams(q, runtimeParams); err != nil {
		return out, err
	}
	page, size, err := paging(q.Get("page"), q.Get("page_size"))
	if err != nil {
		return out, err
	}
	out.q.Paging = storage.Paging{Page: page, PageSize: size}
	for _, p := range runtimeFilters {
		if err := p.parse(h, q, &out); err != nil {
			return runtimeRequest{}, err
		}
	}
	if out.q.Sort, out.q.Descending, err = sortOrder(q); err != nil {
		return runtimeRequest{}, err
	}
	// Naming an instance or runtime asks for it, deprovisioned or not.
	out.q.IncludeDeleted = len(out.q.InstanceIDs) > 0 || len(out.q.RuntimeIDs) > 0
	return out, nil
}

// runtimeFilter parses one query parameter of GET /runtimes into the request; the table runs in
// order, as state=expired, expired and expires_within check one another.
type runtimeFilter struct {
	param string
	parse func(h *Handler, q url.Values, r *runtimeRequest) error
}

var runtimeFilters = []runtimeFilter{
	listFilter("account", func(r *runtimeRequest) *[]string { return &r.q.GlobalAccountIDs }),
	listFilter("subaccount", func(r *runtimeRequest) *[]string { return &r.q.SubAccountIDs }),
	listFilter("instance_id", func(r *runtimeRequest) *[]string { return &r.q.InstanceIDs }),
	listFilter("runtime_id", func(r *runtimeRequest) *[]string { return &r.q.RuntimeIDs }),
	listFilter("region", func(r *runtimeRequest) *[]string { return &r.q.Regions }),
	listFilter("shoot", func(r *runtimeRequest) *[]string { return &r.q.ShootNames }),
	{"shoot", parseShootNames},
	{"plan", parsePlans},
	{"state", parseStates},
	{"expired", parseExpired},
	{"expires_within", parseExpiresWithin},
	{"op_detail", parseOpDetail},
	boolFilter("kyma_config", func(r *runtimeRequest) *bool { return &r.kymaCfg }),
	boolFilter("cluster_config", func(r *runtimeRequest) *bool { return &r.clusterCfg }),
	boolFilter("connection_status", func(r *runtimeRequest) *bool { return &r.connection }),
}

// listFilter takes a bounded list of values as they are.
func listFilter(param string, into func(*runtimeRequest) *[]string) runtimeFilter {
	return runtimeFilter{param, func(_ *Handler, q url.Values, r *runtimeRequest) error {
		var err error
		*into(r), err = boundedList(q, param)
		return err
	}}
}

// boolFilter takes true or false, absent being false.
func boolFilter(param string, into func(*runtimeRequest) *bool) runtimeFilter {
	return runtimeFilter{param, func(_ *Handler, q url.Values, r *runtimeRequest) error {
		v := q.Get(param)
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: must be true or false, got %q", param, v)
		}
		*into(r) = b
		return nil
	}}
}

func parseShootNames(_ *Handler, _ url.Values, r *runtimeRequest) error {
	for _, n := range r.q.ShootNames {
		if !shootName.MatchString(n) {
			return fmt.Errorf("shoot: %q is not a shoot name (lower-case letters, digits and '-')", n)
		}
	}
	return nil
}

func parsePlans(h *Handler, q url.Values, r *runtimeRequest) error {
	plans, err := boundedList(q, "plan")
	if err != nil {
		return err
	}
	for _, p := range plans {
		id, ok := h.plans.PlanID(p)
		if !ok {
			return fmt.Errorf("plan: unknown plan %q", p)
		}
		r.q.PlanIDs = append(r.q.PlanIDs, id)
	}
	return nil
}

func parseStates(_ *Handler, q url.Values, r *runtimeRequest) error {
	states, err := boundedList(q, "state")
	if err != nil {
		return err
	}
	known := append(storage.RuntimeStates(), stateExpired)
	for _, st := range states {
		switch {
		case st == stateExpired:
			yes := true
			r.q.Expired = &yes
		case slices.Contains(known, st):
			r.q.States = append(r.q.States, st)
		default:
			return fmt.Errorf("state: unknown state %q (%s)", st, strings.Join(known, ", "))
		}
	}
	return nil
}

func parseExpired(_ *Handler, q url.Values, r *runtimeRequest) error {
	v := q.Get("expired")
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("expired: must be true or false, got %q", v)
	}
	if r.q.Expired != nil && !b {
		return errors.New("expired: false contradicts state=expired")
	}
	r.q.Expired = &b
	return nil
}

func parseExpiresWithin(h *Handler, q url.Values, r *runtimeRequest) error {
	v := q.Get("expires_within")
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxExpiresWithin {
		return fmt.Errorf("expires_within: must be a duration from 0s to %s (e.g. 72h), got %q", maxExpiresWithin, v)
	}
	if r.q.Expired != nil && *r.q.Expired {
		return errors.New("expires_within: expired instances do not expire again")
	}
	no := false
	r.q.Expired, r.q.CreatedBefore = &no, h.expirer.CreatedBefore(h.clock.Now().Add(d))
	return nil
}

func parseOpDetail(_ *Handler, q url.Values, r *runtimeRequest) error {
	switch v := q.Get("op_detail"); v {
	case "", "last":
	case "all":
		r.allOps = true
	default:
		return fmt.Errorf("op_detail: must be all or last, got %q", v)
	}
	return nil
}

func (h *Handler) runtimes(w http.ResponseWriter, r *http.Request) {
	req, err := h.parseRuntimes(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.fromProvisioner() && h.provisioner == nil {
		writeError(w, http.StatusServiceUnavailable, "kyma_config, cluster_config and connection_status need the provisioner, which this broker has not")
		return
	}
	res, err := h.store.Lifecycle().FindRuntimes(r.Context(), req.q)
	if err != nil {
		h.fail(w, err)
		return
	}
	dtos, kymaVersions, err := h.dtos(r.Context(), res.Items, req.allOps)
	if err != nil {
		h.fail(w, err)
		return
	}
	if req.fromProvisioner() {
		h.configs(r.Context(), res.Items, dtos, kymaVersions, req)
	}
	writeJSON(w, runtime.Page{Data: dtos, Count: len(dtos), TotalCount: res.TotalCount})
}

// sortOrder reads sort (default created_at) and order (asc or desc, default asc).
func sortOrder(q url.Values) (string, bool, error) {
	sort := q.Get("sort")
	if sort != "" && !slices.Contains(storage.RuntimeSorts(), sort) {
		return "", false, fmt.Errorf("sort: unknown sort %q (known: %s)", sort, strings.Join(storage.RuntimeSorts(), ", "))
	}
	switch o := q.Get("order"); o {
	case "", "asc":
		return sort, false, nil
	case "desc":
		return sort, true, nil
	default:
		return "", false, fmt.Errorf("order: must be asc or desc, got %q", o)
	}
}

// onlyParams refuses, by name, a query parameter not in known.
func onlyParams(q url.Values, known []string) error {
	for k := range q {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%s: unknown parameter (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// boundedList is list with bounds on the number and length of the values.
func boundedList(q url.Values, key string) ([]string, error) {
	vals := list(q, key)
	if len(vals) > maxFilterValues {
		return nil, fmt.Errorf("%s: at most %d values, got %d", key, maxFilterValues, len(vals))
	}
	for _, v := range vals {
		if len(v) > maxValueLength {
			return nil, fmt.Errorf("%s: values are at most %d characters", key, maxValueLength)
		}
	}
	return vals, nil
}

// dtos builds the page's DTOs, and the Kyma version each runtime's newest provisioning
// installed.
func (h *Handler) dtos(ctx context.Context, items []storage.RuntimeRow, allOps bool) ([]runtime.DTO, []string, error) {
	insts := make([]storage.Instance, len(items))
	for i, it := range items {
		insts[i] = it.Instance
	}
	byInstance, err := h.operationsOf(ctx, insts)
	if err != nil {
		return nil, nil, err
	}
	out := make([]runtime.DTO, 0, len(items))
	versions := make([]string, len(items))
	for _, row := range items {
		inst := row.Instance
		ops := byInstance[inst.InstanceID]
		d := runtime.DTO{
			InstanceID: inst.InstanceID, RuntimeID: inst.RuntimeID, GlobalAccountID: inst.GlobalAccountID, SubAccountID: inst.SubAccountID,
			ProviderRegion: inst.ProviderRegion, ServiceID: inst.ServiceID, ServicePlanID: inst.PlanID, ServicePlanName: h.plans.PlanName(inst.PlanID),
			DashboardURL: inst.DashboardURL, Parameters: inst.Parameters, ExpiredAt: inst.ExpiredAt,
			Status: runtime.Status{State: row.State, CreatedAt: inst.CreatedAt, ModifiedAt: inst.UpdatedAt, DeletedAt: inst.DeletedAt},
		}
		if life := h.expirer.Lifetime(inst.PlanID); life > 0 && inst.ExpiredAt == nil && inst.DeletedAt == nil {
			at := inst.CreatedAt.Add(life)
			d.ExpiresAt = &at
		}
		versionKnown := false
		for _, op := range ops { // newest first: keep the first of each type
			if !versionKnown {
				// The Kyma version installed is the newest succeeded Kyma upgrade's, or else the
				// provisioning's.
				versions[len(out)], versionKnown = installedKymaVersion(op)
			}
			dto := operationDTO(op)
			if allOps {
				d.Status.Operations = append(d.Status.Operations, *dto)
			}
			var slot **runtime.Operation
			switch op.Type {
			case instance.TypeProvision:
				slot = &d.Status.Provisioning
			case instance.TypeDeprovision:
				slot = &d.Status.Deprovisioning
			case instance.TypeUpdate:
				slot = &d.Status.Update
			case instance.TypeUpgradeKyma:
				slot = &d.Status.UpgradingKyma
			case instance.TypeUpgradeCluster:
				slot = &d.Status.UpgradingCluster
			case instance.TypeSuspension:
				slot = &d.Status.Suspension
			}
			if slot != nil && *slot == nil {
				*slot = dto
			}
		}
		out = append(out, d)
	}
	return out, versions, nil
}

// installedKymaVersion is the Kyma version op installed, and whether it tells one: a succeeded
// Kyma upgrade or a provisioning (whatever its state: it is the first version known).
func installedKymaVersion(op storage.Operation) (string, bool) {
	switch {
	case op.Type == instance.TypeUpgradeKyma && op.State == storage.StateSucceeded:
		var data instance.UpgradeKymaData
		if json.Unmarshal(op.Data, &data) == nil && data.KymaVersion != "" {
			return data.KymaVersion, true
		}
	case op.Type == instance.TypeProvision:
		var data instance.ProvisioningData
		if json.Unmarshal(op.Data, &data) == nil {
			return data.KymaVersion, true
		}
	}
	return "", false
}

// operationDTO is an operation as GET /runtimes shows it; an unfinished one tells where it is.
func operationDTO(op storage.Operation) *runtime.Operation {
	dto := &runtime.Operation{OperationID: op.ID, Type: op.Type, State: string(op.State), Description: op.Description, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt}
	switch op.State {
	case storage.StateFailed:
		dto.Description = op.LastError
	case storage.StatePending, storage.StateInProgress:
		dto.Stage = op.Stage
		if step, sp := op.Progress.CurrentStep(); step != "" {
			since := sp.FirstAttempt
			dto.CurrentStep, dto.CurrentStepAttempts, dto.CurrentStepSince = step, sp.Attempts, &since
		}
	}
	return dto
}

// operationsOf reads the operations of a page of instances in one query per 1000 operations
// (not one per instance), grouped by instance, newest first.
func (h *Handler) operationsOf(ctx context.Context, items []storage.Instance) (map[string][]storage.Operation, error) {
	out := make(map[string][]storage.Operation, len(items))
	if len(items) == 0 {
		return out, nil
	}
	ids := make([]string, len(items))
	for i, inst := range items {
		ids[i] = inst.InstanceID
	}
	for p := 1; ; p++ {
		page, err := h.store.Operations().ListOperations(ctx, storage.OperationFilter{InstanceIDs: ids, Paging: storage.Paging{Page: p, PageSize: 1000}})
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
	if errors.Is(err, storage.ErrTooManyValues) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if storage.IsFull(err) {
		health.RetryLater(w)
		writeError(w, http.StatusServiceUnavailable, unavailable.FullMessage)
		return
	}
	if storage.IsCanceled(err) {
		h.log.WithError(err).Info("operator request ended before its answer (client gone or deadline passed)")
		health.RetryLater(w)
		writeError(w, http.StatusServiceUnavailable, health.UnavailableMessage)
		return
	}
	if storage.IsUnavailable(err) {
		h.log.WithError(err).Warn("operator request refused: database unavailable")
		health.RetryLater(w)
		writeError(w, http.StatusServiceUnavailable, health.UnavailableMessage)
		return
	}
	h.log.WithError(err).Error("operator request failed")
	writeError(w, http.StatusInternalServerError, "internal error, see the broker's log")
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// mustJSON encodes a value that always encodes (generated API types).
func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return raw
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
