package operator

import (
	"fmt"
	"net/http"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func (h *Handler) routeOrchestrations() {
	h.handle("GET /orchestrations", h.listOrchestrations)
	h.handle("GET /orchestrations/{id}", h.getOrchestration)
	h.handle("GET /orchestrations/{id}/operations", h.orchestrationOperations)
	h.handle("GET /orchestrations/{id}/operations/{opID}", h.orchestrationOperation)
	h.handle("PUT /orchestrations/{id}/cancel", h.cancelOrchestration)
	h.handle("PUT /orchestrations/{id}/retry", h.retryOrchestration)
}

// maxRetryOperations bounds the operationIDs of a retry (each is looked up).
const maxRetryOperations = 1000

// pagingOf reads page and page_size (400 naming the field).
func pagingOf(w http.ResponseWriter, r *http.Request) (storage.Paging, bool) {
	page, size, err := paging(r.URL.Query().Get("page"), r.URL.Query().Get("page_size"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return storage.Paging{}, false
	}
	return storage.Paging{Page: page, PageSize: size}, true
}

func (h *Handler) listOrchestrations(w http.ResponseWriter, r *http.Request) {
	p, ok := pagingOf(w, r)
	if !ok {
		return
	}
	states, err := boundedList(r.URL.Query(), "state")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	out, err := h.orch.List(r.Context(), states, p)
	h.answer(w, out, err)
}

func (h *Handler) getOrchestration(w http.ResponseWriter, r *http.Request) {
	out, err := h.orch.Get(r.Context(), r.PathValue("id"))
	h.answer(w, out, err)
}

func (h *Handler) orchestrationOperations(w http.ResponseWriter, r *http.Request) {
	p, ok := pagingOf(w, r)
	if !ok {
		return
	}
	states, err := boundedList(r.URL.Query(), "state")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	out, err := h.orch.Operations(r.Context(), r.PathValue("id"), states, p)
	h.answer(w, out, err)
}

func (h *Handler) orchestrationOperation(w http.ResponseWriter, r *http.Request) {
	out, err := h.orch.Operation(r.Context(), r.PathValue("id"), r.PathValue("opID"))
	h.answer(w, out, err)
}

func (h *Handler) cancelOrchestration(w http.ResponseWriter, r *http.Request) {
	out, err := h.orch.Cancel(r.Context(), r.PathValue("id"))
	h.answer(w, out, err)
}

func (h *Handler) retryOrchestration(w http.ResponseWriter, r *http.Request) {
	var req dto.RetryRequest
	if !decode(w, r, &req, true) {
		return
	}
	if len(req.OperationIDs) > maxRetryOperations {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("operationIDs: at most %d, got %d (without operationIDs every failed operation is retried)", maxRetryOperations, len(req.OperationIDs)))
		return
	}
	for i, id := range req.OperationIDs {
		if id == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("operationIDs[%d]: is empty", i))
			return
		}
	}
	out, err := h.orch.Retry(r.Context(), r.PathValue("id"), req.OperationIDs)
	if err == nil {
		writeJSONStatus(w, http.StatusAccepted, out)
		return
	}
	h.answer(w, out, err)
}

func (h *Handler) answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		h.orchestrationError(w, err)
		return
	}
	writeJSON(w, v)
}
