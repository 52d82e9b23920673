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

func operationStatus(op storage.Operation, rt storage.Runtime) (*gqlschema.OperationStatus, error) {
	typ, ok := operationTypes[op.Type]
	if !ok {
		return nil, fmt.Errorf("operation %s has type %q, not a provisioner operation", op.ID, op.Type)
	}
	if typ == gqlschema.OperationTypeProvision || typ == gqlschema.OperationTypeDeprovision {
		var data operations.Data
		if err := json.Unmarshal(op.Data, &data); err != nil {
			return nil, fmt.Errorf("decoding operation %s: %w", op.ID, err)
		}
		if data.Config.Kyma == nil {
			typ = map[gqlschema.OperationType]gqlschema.OperationType{
				gqlschema.OperationTypeProvision:   gqlschema.OperationTypeProvisionNoInstall,
				gqlschema.OperationTypeDeprovision: gqlschema.OperationTypeDeprovisionNoInstall,
			}[typ]
		}
	}
	id, runtimeID, msg := op.ID, rt.ID, op.Description
	out := &gqlschema.OperationStatus{ID: &id, Operation: typ, State: operationStates[op.State], Message: &msg, RuntimeID: &runtimeID}
	if rt.CompassRuntimeID != "" {
		cid := rt.CompassRuntimeID
		out.CompassRuntimeID = &cid
	}
	if op.State == storage.StateFailed {
		out.LastError = &gqlschema.LastError{ErrMessage: op.LastError, Reason: op.Stage, Component: "provisioner"}
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
