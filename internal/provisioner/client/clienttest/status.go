package clienttest

import "github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"

// Status is the provisioner's status of operation id in state; runtimeID, when not empty, is the
// runtime it acts on. Operation (the type) is left empty: set it where a test needs it.
func Status(id, runtimeID string, state gqlschema.OperationState) *gqlschema.OperationStatus {
	st := &gqlschema.OperationStatus{ID: &id, State: state}
	if runtimeID != "" {
		st.RuntimeID = &runtimeID
	}
	return st
}
