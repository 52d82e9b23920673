package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"github.com/kyma-project/kyma-environment-broker/internal/lifecycle"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// validID refuses IDs no instance can have (empty, too long, control characters).
func validID(id string) error {
	if id == "" || len(id) > maxValueLength {
		return fmt.Errorf("instance ID must be 1 to %d characters", maxValueLength)
	}
	if strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return errors.New("instance ID must not contain control characters")
	}
	return nil
}

// expire is PUT /expire/service_instance/{id}: 202 with the suspension started, 200 for a
// repeat (or a suspended instance: only the expiry is recorded), 400 for plans without
// expiry, 404 for unknown or deprovisioned instances, 409 while another operation runs.
func (h *Handler) expire(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := validID(id); err != nil {
		writeError(w, http.StatusBadRequest, "id: "+err.Error())
		return
	}
	if n, _ := r.Body.Read(make([]byte, 1)); n > 0 {
		writeError(w, http.StatusBadRequest, "body: this endpoint takes no body")
		return
	}
	if h.expirer.ExpiryDays == nil {
		writeError(w, http.StatusServiceUnavailable, "expiry is not configured on this broker")
		return
	}
	out, err := h.expirer.Expire(r.Context(), id, h.clock.Now())
	switch {
	case errors.Is(err, storage.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("instance %s does not exist or was deprovisioned", id))
	case errors.Is(err, lifecycle.ErrNotExpirable):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("id: instance %s: %v", id, err))
	case errors.Is(err, lifecycle.ErrBusy):
		writeError(w, http.StatusConflict, fmt.Sprintf("instance %s: %v; expire it when it has finished", id, err))
	case err != nil:
		h.fail(w, err)
	default:
		status := http.StatusAccepted
		if out.AlreadyExpired || out.OperationID == "" {
			status = http.StatusOK
		}
		h.log.WithField("instance_id", id).WithField("operation_id", out.OperationID).Info("instance expired by an operator")
		writeJSONStatus(w, status, out)
	}
}

// kubeconfig is GET /kubeconfig/{id}: the runtime's admin kubeconfig; 404 for unknown or
// deprovisioned instances, 409 while there is no runtime (provisioning, failed, suspended).
func (h *Handler) kubeconfig(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := validID(id); err != nil {
		writeError(w, http.StatusBadRequest, "id: "+err.Error())
		return
	}
	page, err := h.store.Lifecycle().FindRuntimes(r.Context(), storage.RuntimeQuery{InstanceFilter: storage.InstanceFilter{InstanceIDs: []string{id}}})
	if err != nil {
		h.fail(w, err)
		return
	}
	if len(page.Items) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("instance %s does not exist or was deprovisioned", id))
		return
	}
	rt := page.Items[0]
	if rt.RuntimeID == "" || !slices.Contains([]string{storage.RuntimeProvisioned, storage.RuntimeUpdating, storage.RuntimeUpgrading}, rt.State) {
		writeError(w, http.StatusConflict, fmt.Sprintf("instance %s has no runtime to connect to (state %s)", id, rt.State))
		return
	}
	if h.provisioner == nil {
		writeError(w, http.StatusServiceUnavailable, "kubeconfigs need the provisioner, which this broker has not")
		return
	}
	rc, err := h.provisioner.RuntimeConfiguration(r.Context(), rt.GlobalAccountID, rt.RuntimeID)
	switch {
	case apperr.CodeOf(err) == apperr.CodeNotFound:
		writeError(w, http.StatusConflict, fmt.Sprintf("instance %s: the provisioner does not know runtime %s", id, rt.RuntimeID))
		return
	case err != nil:
		h.log.WithError(err).WithField("instance_id", id).Warn("reading a kubeconfig from the provisioner failed")
		writeError(w, http.StatusBadGateway, fmt.Sprintf("provisioner: reading runtime %s: %v", rt.RuntimeID, err))
		return
	}
	if rc == nil || rc.Kubeconfig == nil || *rc.Kubeconfig == "" {
		writeError(w, http.StatusConflict, fmt.Sprintf("runtime %s of instance %s has no kubeconfig yet", rt.RuntimeID, id))
		return
	}
	h.log.WithField("instance_id", id).Info("kubeconfig handed out to an operator")
	w.Header().Set("Content-Type", "application/x-yaml")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="kubeconfig-%s.yaml"`, rt.RuntimeID))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(*rc.Kubeconfig))
}

// configs fills the provisioner's Kyma and cluster configuration and the agent's connection
// status of a page of runtimes, as req asks, a few at a time; a runtime whose status cannot be
// read says why.
func (h *Handler) configs(ctx context.Context, rows []storage.RuntimeRow, dtos []runtime.DTO, kymaVersions []string, req runtimeRequest) {
	kyma, cluster := req.kymaCfg, req.clusterCfg
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range rows {
		if rows[i].RuntimeID == "" || rows[i].DeletedAt != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			st, err := h.runtimeStatus(ctx, rows[i], req.connection)
			if err != nil {
				dtos[i].ConfigError = fmt.Sprintf("provisioner: %v", err)
				return
			}
			if req.connection && st.RuntimeConnectionStatus != nil {
				cs := &runtime.ConnectionStatus{Status: string(st.RuntimeConnectionStatus.Status)}
				for _, e := range st.RuntimeConnectionStatus.Errors {
					if e != nil && e.Message != nil {
						cs.Errors = append(cs.Errors, *e.Message)
					}
				}
				dtos[i].RuntimeConnectionStatus = cs
			}
			if st.RuntimeConfiguration == nil {
				return
			}
			if kyma && st.RuntimeConfiguration.KymaConfig != nil {
				dtos[i].KymaConfig = mustJSON(st.RuntimeConfiguration.KymaConfig)
			}
			if kyma && dtos[i].KymaConfig == nil && kymaVersions[i] != "" {
				// Kyma 2.x is installed by the reconciler, not the provisioner: the version the
				// broker installed is what is known.
				dtos[i].KymaConfig = mustJSON(map[string]string{"version": kymaVersions[i], "installedBy": "reconciler"})
			}
			if cluster && st.RuntimeConfiguration.ClusterConfig != nil {
				dtos[i].ClusterConfig = mustJSON(st.RuntimeConfiguration.ClusterConfig)
			}
		}(i)
	}
	wg.Wait()
}

// runtimeStatus reads what configs shows of a runtime: its configuration alone unless the agent's
// connection is asked for, which the provisioner reads from the Director.
func (h *Handler) runtimeStatus(ctx context.Context, row storage.RuntimeRow, connection bool) (*gqlschema.RuntimeStatus, error) {
	if connection {
		return h.provisioner.RuntimeStatus(ctx, row.GlobalAccountID, row.RuntimeID)
	}
	rc, err := h.provisioner.RuntimeConfiguration(ctx, row.GlobalAccountID, row.RuntimeID)
	if err != nil {
		return nil, err
	}
	return &gqlschema.RuntimeStatus{RuntimeConfiguration: rc}, nil
}

// infoRuntimes is GET /info/runtimes: live runtimes per plan, region and state.
func (h *Handler) infoRuntimes(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		writeError(w, http.StatusBadRequest, "this endpoint takes no parameters")
		return
	}
	rows, err := h.store.Lifecycle().CountRuntimes(r.Context())
	if err != nil {
		h.fail(w, err)
		return
	}
	out := runtime.Counts{Plans: map[string]int{}, Regions: map[string]int{}, States: map[string]int{}, Rows: []runtime.CountRow{}}
	for _, c := range rows {
		plan := h.plans.PlanName(c.PlanID)
		if plan == "" {
			plan = c.PlanID
		}
		out.Total += c.Count
		out.Plans[plan] += c.Count
		out.Regions[c.Region] += c.Count
		out.States[c.State] += c.Count
		out.Rows = append(out.Rows, runtime.CountRow{Plan: plan, Region: c.Region, State: c.State, Count: c.Count})
	}
	writeJSON(w, out)
}

var orphanStates = []string{storage.RetriggerOrphaned, storage.RetriggerRetrying, storage.RetriggerCompleted}

// orphans is GET /info/orphans: deprovisioning steps left not completed that the re-trigger
// job gave up on (state=orphaned, the default), still retries, or completed.
func (h *Handler) orphans(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := onlyParams(q, []string{"state", "page", "page_size"}); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, size, err := paging(q.Get("page"), q.Get("page_size"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	states, err := boundedList(q, "state")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(states) == 0 {
		states = []string{storage.RetriggerOrphaned}
	}
	for _, s := range states {
		if !slices.Contains(orphanStates, s) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("state: unknown state %q (%s)", s, strings.Join(orphanStates, ", ")))
			return
		}
	}
	res, err := h.store.Lifecycle().ListRetriggers(r.Context(), states, nil, storage.Paging{Page: page, PageSize: size})
	if err != nil {
		h.fail(w, err)
		return
	}
	out := runtime.OrphanPage{Data: []runtime.Orphan{}, TotalCount: res.TotalCount}
	for _, rt := range res.Items {
		out.Data = append(out.Data, runtime.Orphan{
			OperationID: rt.OriginID, InstanceID: rt.InstanceID, Type: rt.OriginType, Steps: rt.Steps, State: rt.State,
			Attempts: rt.Attempts, LastOperationID: rt.LastOperationID, LastError: rt.LastError, Since: rt.CreatedAt, UpdatedAt: rt.UpdatedAt,
		})
	}
	out.Count = len(out.Data)
	writeJSON(w, out)
}
