package clienttest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/clienttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

func TestFake_NilFuncIsNotImplementedAndCallsAreRecorded(t *testing.T) {
	ctx := context.Background()
	f := &clienttest.Fake{}
	_, err := f.ProvisionRuntime(ctx, "t", gqlschema.ProvisionRuntimeInput{})
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)
	assert.ErrorContains(t, err, "ProvisionRuntime")
	_, err = f.DeprovisionRuntime(ctx, "t", "rt")
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)
	_, err = f.UpgradeRuntime(ctx, "t", "rt", gqlschema.UpgradeRuntimeInput{})
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)
	_, err = f.UpgradeShoot(ctx, "t", "rt", gqlschema.UpgradeShootInput{})
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)
	_, err = f.HibernateRuntime(ctx, "t", "rt")
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)
	_, err = f.ReconnectRuntimeAgent(ctx, "t", "rt")
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)
	_, err = f.RuntimeStatus(ctx, "t", "rt")
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)
	_, err = f.RuntimeOperationStatus(ctx, "t", "op")
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)

	calls := f.Calls()
	require.Len(t, calls, 8)
	var methods []string
	for _, c := range calls {
		methods = append(methods, c.Method)
		assert.Equal(t, "t", c.Tenant)
	}
	assert.Equal(t, []string{"ProvisionRuntime", "DeprovisionRuntime", "UpgradeRuntime", "UpgradeShoot",
		"HibernateRuntime", "ReconnectRuntimeAgent", "RuntimeStatus", "RuntimeOperationStatus"}, methods)
	assert.NotNil(t, calls[0].Provision)
	assert.NotNil(t, calls[2].Upgrade)
	assert.NotNil(t, calls[3].Shoot)
	assert.Equal(t, []clienttest.Call{{Method: "RuntimeOperationStatus", Tenant: "t", ID: "op"}}, f.CallsTo("RuntimeOperationStatus"))
	f.Reset()
	assert.Empty(t, f.Calls())
}

func TestFake_FuncsAnswer(t *testing.T) {
	f := &clienttest.Fake{
		UpgradeShootFunc: func(tenant, runtimeID string, in gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
			return clienttest.Status("op-1", runtimeID, gqlschema.OperationStateInProgress), nil
		},
	}
	st, err := f.UpgradeShoot(context.Background(), "t", "rt-1", gqlschema.UpgradeShootInput{Administrators: []string{"a"}})
	require.NoError(t, err)
	assert.Equal(t, "op-1", *st.ID)
	assert.Equal(t, "rt-1", *st.RuntimeID)
	assert.Equal(t, gqlschema.OperationStateInProgress, st.State)
	assert.Equal(t, []string{"a"}, f.Calls()[0].Shoot.Administrators)
}

func TestFake_BindReadsTheFuncAtCallTime(t *testing.T) {
	var status func(tenant, operationID string) (*gqlschema.OperationStatus, error)
	f := &clienttest.Fake{}
	f.BindRuntimeOperationStatus(&status)
	_, err := f.RuntimeOperationStatus(context.Background(), "t", "op")
	assert.ErrorIs(t, err, clienttest.ErrNotImplemented)

	boom := errors.New("boom")
	status = func(string, string) (*gqlschema.OperationStatus, error) { return nil, boom }
	_, err = f.RuntimeOperationStatus(context.Background(), "t", "op")
	assert.ErrorIs(t, err, boom)
}

func TestStatus(t *testing.T) {
	st := clienttest.Status("op-1", "", gqlschema.OperationStateFailed)
	assert.Equal(t, "op-1", *st.ID)
	assert.Nil(t, st.RuntimeID)
	assert.Equal(t, gqlschema.OperationStateFailed, st.State)
}
