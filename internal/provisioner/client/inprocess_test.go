package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// erroringService fails every call with err.
type erroringService struct {
	client.Client
	err error
}

func (s erroringService) RuntimeStatus(context.Context, string, string) (*gqlschema.RuntimeStatus, error) {
	return nil, s.err
}

func TestInProcessErrors(t *testing.T) {
	t.Run("apperr errors arrive flattened, as over the wire", func(t *testing.T) {
		original := apperr.NotFound("runtime %s not found", "rt-1")
		c := client.NewInProcess(erroringService{err: fmt.Errorf("while loading: %w", original)})

		_, err := c.RuntimeStatus(context.Background(), "t", "rt-1")

		assert.Equal(t, &apperr.Error{Code: apperr.CodeNotFound, Reason: "runtime rt-1 not found"}, err)
		var appErr *apperr.Error
		require.True(t, errors.As(err, &appErr))
		assert.NotSame(t, original, appErr)
	})
	t.Run("other errors are internal", func(t *testing.T) {
		c := client.NewInProcess(erroringService{err: errors.New("db down")})

		_, err := c.RuntimeStatus(context.Background(), "t", "rt-1")

		assert.Equal(t, apperr.CodeInternal, apperr.CodeOf(err))
	})
}

func TestLeftBehind(t *testing.T) {
	status := func(state gqlschema.OperationState, msg string) *gqlschema.OperationStatus {
		return &gqlschema.OperationStatus{State: state, Message: &msg}
	}
	assert.Equal(t, "", client.LeftBehind(status(gqlschema.OperationStateSucceeded, "operation succeeded")), "a plain success left nothing")
	assert.Equal(t, "Wait_For_Cluster_Deletion (Director: HTTP 500)",
		client.LeftBehind(status(gqlschema.OperationStateSucceeded, "operation succeeded; not completed: Wait_For_Cluster_Deletion (Director: HTTP 500)")))
	assert.Equal(t, "", client.LeftBehind(status(gqlschema.OperationStateFailed, "operation succeeded; not completed: X")), "only a success")
	assert.Equal(t, "", client.LeftBehind(&gqlschema.OperationStatus{State: gqlschema.OperationStateSucceeded}))
}
