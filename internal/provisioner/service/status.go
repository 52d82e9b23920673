package service

import (
	"encoding/json"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

var operationTypes = map[string]gqlschema.OperationType{
	operations.TypeProvision:      gqlschema.OperationTypeProvision,
	operations.TypeDeprovision:    gqlschema.OperationTypeDeprovision,
	operations.TypeUpgradeRuntime: gqlschema.OperationTypeUpgrade,
	operations.TypeUpgradeShoot:   gqlschema.OperationTypeUpgradeShoot,
	operations.TypeHibernate:      gqlschema.OperationTypeHibernate,
	operations.TypeReconnect:      gqlschema.OperationTypeReconnectRuntime,
}

var operationStates = map[storage.OperationState]gqlschema.OperationState{
	storage.StatePending:    gqlschema.OperationStatePending,
	storage.StateInProgress: gqlschema.OperationStateInProgress,
	storage.StateSucceeded:  gqlschema.OperationStateSucceeded,
	storage.StateFailed:     gqlschema.OperationStateFailed,
}

// operationStatus is the status of op (of runtime rt) read whole.
func operationStatus(op storage.Operation, rt storage.Runtime) (*gqlschema.OperationStatus, error) {
	st := storage.RuntimeOperationStatus{
		OperationStatus: storage.OperationStatus{ID: op.ID, InstanceID: rt.ID, Type: op.Type, State: op.State, Description: op.Description, LastError: op.LastError},
		Stage:           op.Stage, RuntimeFound: true, Tenant: rt.Tenant, CompassRuntimeID: rt.CompassRuntimeID, Deleted: rt.Deleted,
	}
	if noInstall(op.Type) != "" {
		var data operations.Data
		if err := json.Unmarshal(op.Data, &data); err != nil {
			return nil, fmt.Errorf("decoding operation %s: %w", op.ID, err)
		}
		st.Kyma = data.Config.Kyma != nil
	}
	return statusOf(st)
}

// noInstall is the type a provisioning or deprovisioning without Kyma is reported as; empty for
// the other types, which are reported as they are.
func noInstall(opType string) gqlschema.OperationType {
	switch opType {
	case operations.TypeProvision:
		return gqlschema.OperationTypeProvisionNoInstall
	case operations.TypeDeprovision:
		return gqlschema.OperationTypeDeprovisionNoInstall
	}
	return ""
}

// statusOf is the API's status of an operation (storage.Runtimes.ReadRuntimeOperationStatus, or
// operationStatus from the whole operation): its runtime is st.InstanceID.
func statusOf(st storage.RuntimeOperationStatus) (*gqlschema.OperationStatus, error) {
	typ, ok := operationTypes[st.Type]
	if !ok {
		return nil, fmt.Errorf("operation %s has type %q, not a provisioner operation", st.ID, st.Type)
	}
	if alt := noInstall(st.Type); alt != "" && !st.Kyma {
		typ = alt
	}
	id, runtimeID, msg := st.ID, st.InstanceID, st.Description
	out := &gqlschema.OperationStatus{ID: &id, Operation: typ, State: operationStates[st.State], Message: &msg, RuntimeID: &runtimeID}
	if st.CompassRuntimeID != "" {
		cid := st.CompassRuntimeID
		out.CompassRuntimeID = &cid
	}
	if st.State == storage.StateFailed {
		out.LastError = &gqlschema.LastError{ErrMessage: st.LastError, Reason: st.Stage, Component: "provisioner"}
	}
	return out, nil
}

// connectionStatus derives the agent's connection from the newest operation that connects it.
func connectionStatus(newestFirst []storage.Operation) *gqlschema.RuntimeConnectionStatus {
	for _, op := range newestFirst {
		if op.Type != operations.TypeProvision && op.Type != operations.TypeReconnect {
			continue
		}
		switch {
		case op.Progress.Steps[operations.WaitForAgentToConnect{}.Name()].Done:
			return &gqlschema.RuntimeConnectionStatus{Status: gqlschema.RuntimeAgentConnectionStatusConnected}
		case op.State == storage.StateFailed:
			msg := op.LastError
			return &gqlschema.RuntimeConnectionStatus{Status: gqlschema.RuntimeAgentConnectionStatusDisconnected, Errors: []*gqlschema.Error{{Message: &msg}}}
		}
		break
	}
	return &gqlschema.RuntimeConnectionStatus{Status: gqlschema.RuntimeAgentConnectionStatusPending}
}

// hibernationStatus derives hibernation from the runtime's operations. This API has no wake
// operation, so a runtime whose hibernation succeeded stays hibernated. Hibernation is possible
// for a provisioned runtime that is awake, not being deprovisioned and not busy.
func hibernationStatus(newestFirst []storage.Operation) *gqlschema.HibernationStatus {
	provisioned, hibernated, busy := false, false, false
	for _, op := range newestFirst {
		switch {
		case op.State == storage.StatePending || op.State == storage.StateInProgress:
			busy = true
		case op.State != storage.StateSucceeded:
		case op.Type == operations.TypeProvision:
			provisioned = true
		case op.Type == operations.TypeHibernate:
			hibernated = true
		case op.Type == operations.TypeDeprovision:
			busy = true
		}
	}
	possible := provisioned && !hibernated && !busy
	return &gqlschema.HibernationStatus{Hibernated: &hibernated, HibernationPossible: &possible}
}
