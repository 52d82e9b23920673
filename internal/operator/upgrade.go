package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	dto "github.com/kyma-project/kyma-environment-broker/common/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/orchestration"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Option adjusts New.
type Option func(*Handler)

// WithOrchestrations serves the orchestrations of m (POST /upgrade/..., /orchestrations...);
// without it New uses a manager with the default configuration.
func WithOrchestrations(m *orchestration.Manager) Option { return func(h *Handler) { h.orch = m } }

func (h *Handler) upgradeKyma(w http.ResponseWriter, r *http.Request) {
	h.createOrchestration(w, r, dto.UpgradeKyma)
}

func (h *Handler) upgradeCluster(w http.ResponseWriter, r *http.Request) {
	h.createOrchestration(w, r, dto.UpgradeCluster)
}

// createOrchestration stores an orchestration over the selected runtimes and answers 202 with
// its ID; the scheduler starts the upgrades.
func (h *Handler) createOrchestration(w http.ResponseWriter, r *http.Request, typ string) {
	var p dto.Parameters
	if !decode(w, r, &p, false) {
		return
	}
	id, err := h.orch.Create(r.Context(), typ, p)
	if err != nil {
		h.orchestrationError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orchestrations/"+id)
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(dto.UpgradeResponse{OrchestrationID: id})
}

// decode reads one JSON object (unknown fields refused); optional accepts an empty body.
func decode(w http.ResponseWriter, r *http.Request, into any, optional bool) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var tooBig *http.MaxBytesError
		var typeErr *json.UnmarshalTypeError
		switch {
		case optional && errors.Is(err, io.EOF):
			return true
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit))
		case errors.As(err, &typeErr):
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s: must be a JSON %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value))
		default:
			writeError(w, http.StatusBadRequest, "decoding the request: "+err.Error())
		}
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "decoding the request: unexpected data after the JSON object")
		return false
	}
	return true
}

// orchestrationError answers 400 (names the field), 404, 409 or 500.
func (h *Handler) orchestrationError(w http.ResponseWriter, err error) {
	var bad *orchestration.BadRequestError
	switch {
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, bad.Msg)
	case errors.Is(err, storage.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found: "+err.Error())
	case errors.Is(err, storage.ErrOrchestrationState), errors.Is(err, storage.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	default:
		h.fail(w, err)
	}
}
