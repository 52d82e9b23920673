package client

import (
	"fmt"
	"github.com/kyma-project/kyma-environment-broker/internal/engine"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// Outcome tells a caller polling a provisioner operation whether it finished: (true, nil) when
// it succeeded, (true, error with the provisioner's reason) when it failed, (false, nil) while
// it runs.
func Outcome(st *gqlschema.OperationStatus) (bool, error) {
	switch st.State {
	case gqlschema.OperationStateSucceeded:
		return true, nil
	case gqlschema.OperationStateFailed:
		reason := "no reason given"
		if st.LastError != nil && st.LastError.ErrMessage != "" {
			reason = st.LastError.ErrMessage
		} else if st.Message != nil && *st.Message != "" {
			reason = *st.Message
		}
		return true, fmt.Errorf("provisioner operation %s failed: %s", deref(st.ID), reason)
	}
	return false, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// LeftBehind is what a succeeded operation did not complete (steps given up without failing, with
// their last errors), "" when it completed everything.
func LeftBehind(st *gqlschema.OperationStatus) string {
	if st.State != gqlschema.OperationStateSucceeded || st.Message == nil {
		return ""
	}
	if left, ok := engine.LeftBehind(*st.Message); ok {
		return left
	}
	return ""
}
