package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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

// statusService answers RuntimeOperationStatus with st.
type statusService struct {
	client.Client
	st *gqlschema.OperationStatus
}

func (s statusService) RuntimeOperationStatus(context.Context, string, string) (*gqlschema.OperationStatus, error) {
	return s.st, nil
}

// The operation status is copied field by field (it is polled): the copy is what a JSON round trip
// gives, and shares no pointer with the service's answer.
func TestInProcessOperationStatusCopy(t *testing.T) {
	str := func(s string) *string { return &s }
	st := &gqlschema.OperationStatus{ID: str("op-1"), Operation: gqlschema.OperationTypeProvision, State: gqlschema.OperationStateFailed,
		Message: str("failed"), RuntimeID: str("rt-1"), CompassRuntimeID: str("c-1"),
		LastError: &gqlschema.LastError{ErrMessage: "boom", Reason: "WaitingForClusterCreation", Component: "provisioner"}}
	require.Equal(t, 7, reflect.TypeOf(*st).NumField(), "every field is set here and copied by copyOperationStatus")
	require.Equal(t, 3, reflect.TypeOf(*st.LastError).NumField())
	raw, err := json.Marshal(st)
	require.NoError(t, err)
	var viaJSON gqlschema.OperationStatus
	require.NoError(t, json.Unmarshal(raw, &viaJSON))

	got, err := client.NewInProcess(statusService{st: st}).RuntimeOperationStatus(context.Background(), "t", "op-1")
	require.NoError(t, err)
	assert.Equal(t, &viaJSON, got)
	*got.ID, *got.Message, *got.RuntimeID, *got.CompassRuntimeID, got.LastError.ErrMessage = "x", "x", "x", "x", "x"
	assert.Equal(t, "op-1", *st.ID)
	assert.Equal(t, "failed", *st.Message)
	assert.Equal(t, "rt-1", *st.RuntimeID)
	assert.Equal(t, "c-1", *st.CompassRuntimeID)
	assert.Equal(t, "boom", st.LastError.ErrMessage)

	nilFields, err := client.NewInProcess(statusService{st: &gqlschema.OperationStatus{State: gqlschema.OperationStatePending}}).
		RuntimeOperationStatus(context.Background(), "t", "op-1")
	require.NoError(t, err)
	assert.Equal(t, &gqlschema.OperationStatus{State: gqlschema.OperationStatePending}, nilFields)
}
