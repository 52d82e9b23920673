package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/sirupsen/logrus"
)

// Target selects runtimes; every field set must match. Target "all" selects every runtime.
type Target struct {
	Target        string `json:"target,omitempty"`
	InstanceID    string `json:"instanceID,omitempty"`
	RuntimeID     string `json:"runtimeID,omitempty"`
	GlobalAccount string `json:"globalAccount,omitempty"`
	SubAccount    string `json:"subAccount,omitempty"`
	Region        string `json:"region,omitempty"`
	PlanName      string `json:"planName,omitempty"`
}

// Targets include runtimes, then exclude some of them.
type Targets struct {
	Include []Target `json:"include"`
	Exclude []Target `json:"exclude,omitempty"`
}

type upgradeKymaRequest struct {
	Targets Targets `json:"targets"`
	Kyma    struct {
		Version string `json:"version"`
	} `json:"kyma"`
}

type upgradeClusterRequest struct {
	Targets    Targets `json:"targets"`
	Kubernetes struct {
		KubernetesVersion   string `json:"kubernetesVersion"`
		MachineImageVersion string `json:"machineImageVersion,omitempty"`
	} `json:"kubernetes"`
}

// UpgradeResponse lists the operations started and the runtimes skipped.
type UpgradeResponse struct {
	Operations []UpgradeOperation `json:"operations"`
	Skipped    []UpgradeSkipped   `json:"skipped"`
}

// UpgradeOperation is the upgrade started for an instance.
type UpgradeOperation struct {
	InstanceID  string `json:"instanceID"`
	RuntimeID   string `json:"runtimeID"`
	OperationID string `json:"operationID"`
}

// UpgradeSkipped is a selected runtime not upgraded, with why.
type UpgradeSkipped struct {
	InstanceID string `json:"instanceID"`
	Reason     string `json:"reason"`
}

// UpgradeTimeout is the deadline of an upgrade operation (seed 001: 3h).
const UpgradeTimeout = 3 * time.Hour

func (h *Handler) upgradeKyma(w http.ResponseWriter, r *http.Request) {
	var req upgradeKymaRequest
	if !decode(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Kyma.Version) == "" {
		writeError(w, http.StatusBadRequest, "kyma.version: is required")
		return
	}
	h.startUpgrades(w, r, req.Targets, instance.TypeUpgradeKyma, func() any { return instance.UpgradeKymaData{KymaVersion: req.Kyma.Version} })
}

func (h *Handler) upgradeCluster(w http.ResponseWriter, r *http.Request) {
	var req upgradeClusterRequest
	if !decode(w, r, &req) {
		return
	}
	k := req.Kubernetes
	if strings.TrimSpace(k.KubernetesVersion) == "" && strings.TrimSpace(k.MachineImageVersion) == "" {
		writeError(w, http.StatusBadRequest, "kubernetes.kubernetesVersion: is required (or kubernetes.machineImageVersion)")
		return
	}
	h.startUpgrades(w, r, req.Targets, instance.TypeUpgradeCluster, func() any {
		return instance.UpgradeClusterData{KubernetesVersion: k.KubernetesVersion, MachineImageVersion: k.MachineImageVersion}
	})
}

func decode(w http.ResponseWriter, r *http.Request, into any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, "decoding the request: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "decoding the request: unexpected data after the JSON object")
		return false
	}
	return true
}

// startUpgrades creates one upgrade operation per selected live runtime; the step engine runs
// them. An instance busy with another operation is skipped (storage decides, atomically).
func (h *Handler) startUpgrades(w http.ResponseWriter, r *http.Request, t Targets, opType string, data func() any) {
	if err := t.validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	selected, err := h.selectInstances(r, t)
	if err != nil {
		h.fail(w, err)
		return
	}
	out := UpgradeResponse{Operations: []UpgradeOperation{}, Skipped: []UpgradeSkipped{}}
	for _, inst := range selected {
		op, err := engine.NewOperation(opType, inst.InstanceID, data(), UpgradeTimeout, time.Now())
		if err != nil {
			h.fail(w, err)
			return
		}
		op, err = h.store.Instances().InsertOperationExclusive(r.Context(), op, instance.AllTypes())
		var busy *storage.InProgressError
		switch {
		case errors.As(err, &busy):
			out.Skipped = append(out.Skipped, UpgradeSkipped{InstanceID: inst.InstanceID, Reason: fmt.Sprintf("%s operation %s is in progress", busy.Operation.Type, busy.Operation.ID)})
			continue
		case err != nil:
			h.fail(w, err)
			return
		}
		h.log.WithFields(logrus.Fields{"instance_id": inst.InstanceID, "operation_id": op.ID, "type": opType}).Info("upgrade started")
		out.Operations = append(out.Operations, UpgradeOperation{InstanceID: inst.InstanceID, RuntimeID: inst.RuntimeID, OperationID: op.ID})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(out)
}

func (t Targets) validate() error {
	if len(t.Include) == 0 {
		return errors.New("targets.include: at least one target is required")
	}
	for name, list := range map[string][]Target{"include": t.Include, "exclude": t.Exclude} {
		for i, tg := range list {
			if tg.Target != "" && tg.Target != "all" {
				return fmt.Errorf("targets.%s[%d].target: must be \"all\", got %q", name, i, tg.Target)
			}
			if tg == (Target{}) {
				return fmt.Errorf("targets.%s[%d]: set target \"all\" or at least one selector", name, i)
			}
		}
	}
	return nil
}

// select_ lists the live instances with a runtime that an include target matches and no exclude
// target does.
func (h *Handler) selectInstances(r *http.Request, t Targets) ([]storage.Instance, error) {
	var out []storage.Instance
	for p := 1; ; p++ {
		page, err := h.store.Instances().ListInstances(r.Context(), storage.InstanceFilter{Paging: storage.Paging{Page: p, PageSize: 1000}})
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		for _, inst := range page.Items {
			if inst.RuntimeID == "" || inst.DeletedAt != nil {
				continue
			}
			if h.matchesAny(inst, t.Include) && !h.matchesAny(inst, t.Exclude) {
				out = append(out, inst)
			}
		}
		if p*1000 >= page.TotalCount {
			return out, nil
		}
	}
}

func (h *Handler) matchesAny(inst storage.Instance, targets []Target) bool {
	for _, t := range targets {
		// "all" adds no condition of its own: with other fields given, they must all match too.
		if (t.InstanceID == "" || t.InstanceID == inst.InstanceID) && (t.RuntimeID == "" || t.RuntimeID == inst.RuntimeID) &&
			(t.GlobalAccount == "" || t.GlobalAccount == inst.GlobalAccountID) && (t.SubAccount == "" || t.SubAccount == inst.SubAccountID) &&
			(t.Region == "" || t.Region == inst.ProviderRegion) && (t.PlanName == "" || t.PlanName == h.plans.PlanName(inst.PlanID)) {
			return true
		}
	}
	return false
}
