package service

import (
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func noKyma() gqlschema.ProvisionRuntimeInput {
	in := validInput()
	in.KymaConfig = nil
	return in
}

func TestOperationTypes(t *testing.T) {
	e := newTestEnv(t)

	t.Run("provision with and without Kyma", func(t *testing.T) {
		st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, validInput())
		require.NoError(t, err)
		assert.Equal(t, gqlschema.OperationTypeProvision, st.Operation)
		assert.Equal(t, gqlschema.OperationStatePending, st.State)
		assert.NotEmpty(t, *st.ID)
		assert.NotEmpty(t, *st.RuntimeID)
		assert.Nil(t, st.CompassRuntimeID)
		assert.Nil(t, st.LastError)

		st, err = e.svc.ProvisionRuntime(e.ctx, testTenant, noKyma())
		require.NoError(t, err)
		assert.Equal(t, gqlschema.OperationTypeProvisionNoInstall, st.Operation)
		again, err := e.svc.RuntimeOperationStatus(e.ctx, testTenant, *st.ID)
		require.NoError(t, err)
		assert.Equal(t, gqlschema.OperationTypeProvisionNoInstall, again.Operation)
	})

	t.Run("deprovision with and without Kyma", func(t *testing.T) {
		for in, want := range map[*gqlschema.ProvisionRuntimeInput]gqlschema.OperationType{
			ptr(validInput()): gqlschema.OperationTypeDeprovision,
			ptr(noKyma()):     gqlschema.OperationTypeDeprovisionNoInstall,
		} {
			id := e.provision(*in)
			opID, err := e.svc.DeprovisionRuntime(e.ctx, testTenant, id)
			require.NoError(t, err)
			st, err := e.svc.RuntimeOperationStatus(e.ctx, testTenant, opID)
			require.NoError(t, err)
			assert.Equal(t, want, st.Operation)
			assert.Equal(t, id, *st.RuntimeID)
		}
	})

	t.Run("the other operations", func(t *testing.T) {
		id := e.provision(validInput())
		check := func(st *gqlschema.OperationStatus, err error, want gqlschema.OperationType) {
			t.Helper()
			require.NoError(t, err)
			assert.Equal(t, want, st.Operation)
			e.finish(*st.ID, storage.StateSucceeded, nil)
		}
		st, err := e.svc.UpgradeRuntime(e.ctx, testTenant, id, gqlschema.UpgradeRuntimeInput{KymaConfig: validKyma()})
		check(st, err, gqlschema.OperationTypeUpgrade)
		st, err = e.svc.UpgradeShoot(e.ctx, testTenant, id, gqlschema.UpgradeShootInput{GardenerConfig: &gqlschema.GardenerUpgradeInput{}})
		check(st, err, gqlschema.OperationTypeUpgradeShoot)
		st, err = e.svc.HibernateRuntime(e.ctx, testTenant, id)
		check(st, err, gqlschema.OperationTypeHibernate)
		opID, err := e.svc.ReconnectRuntimeAgent(e.ctx, testTenant, id)
		require.NoError(t, err)
		st, err = e.svc.RuntimeOperationStatus(e.ctx, testTenant, opID)
		check(st, err, gqlschema.OperationTypeReconnectRuntime)
	})
}

func TestOperationStatusStatesAndLastError(t *testing.T) {
	e := newTestEnv(t)
	st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, validInput())
	require.NoError(t, err)
	opID, rtID := *st.ID, *st.RuntimeID

	op, err := e.store.Operations().GetOperation(e.ctx, opID)
	require.NoError(t, err)
	op.State, op.Stage, op.Description, op.LastError = storage.StateInProgress, operations.StageWaitingForClusterCreation, "operation in progress", "waiting for the cluster to be created"
	_, err = e.store.Operations().UpdateOperation(e.ctx, op)
	require.NoError(t, err)
	got, err := e.svc.RuntimeOperationStatus(e.ctx, testTenant, opID)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.OperationStateInProgress, got.State)
	assert.Equal(t, "operation in progress", *got.Message)
	assert.Nil(t, got.LastError, "a retry's last error is no failure")

	rt := e.runtime(rtID)
	rt.CompassRuntimeID = "compass-1"
	_, err = e.store.Runtimes().UpdateRuntime(e.ctx, rt)
	require.NoError(t, err)
	e.finish(opID, storage.StateFailed, func(op *storage.Operation) {
		op.Description, op.LastError = "cluster creation failed: quota exceeded", "cluster creation failed: quota exceeded"
	})
	got, err = e.svc.RuntimeOperationStatus(e.ctx, testTenant, opID)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.OperationStateFailed, got.State)
	assert.Equal(t, "compass-1", *got.CompassRuntimeID)
	assert.Equal(t, &gqlschema.LastError{
		ErrMessage: "cluster creation failed: quota exceeded", Reason: "WaitingForClusterCreation", Component: "provisioner",
	}, got.LastError)

	e.finish(opID, storage.StateSucceeded, func(op *storage.Operation) { op.LastError = "" })
	got, err = e.svc.RuntimeOperationStatus(e.ctx, testTenant, opID)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.OperationStateSucceeded, got.State)
	assert.Nil(t, got.LastError)
}

func TestOperationStatusScoping(t *testing.T) {
	e := newTestEnv(t)
	st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, validInput())
	require.NoError(t, err)

	_, err = e.svc.RuntimeOperationStatus(e.ctx, "tenant-b", *st.ID)
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err), "another tenant's operation")
	_, err = e.svc.RuntimeOperationStatus(e.ctx, testTenant, "no-such-operation")
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))
	_, err = e.svc.RuntimeStatus(e.ctx, "tenant-b", *st.RuntimeID)
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))

	// A broker operation on the same ID is not the provisioner's.
	brokerOp, err := engine.NewOperation("provision", *st.RuntimeID, map[string]string{}, 0, t0)
	require.NoError(t, err)
	brokerOp, err = e.store.Operations().InsertOperation(e.ctx, brokerOp)
	require.NoError(t, err)
	e.finish(brokerOp.ID, storage.StateSucceeded, nil)
	_, err = e.svc.RuntimeOperationStatus(e.ctx, testTenant, brokerOp.ID)
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))

	// A deleted runtime's operations stay readable; the runtime does not.
	e.finish(*st.ID, storage.StateSucceeded, nil)
	opID, err := e.svc.DeprovisionRuntime(e.ctx, testTenant, *st.RuntimeID)
	require.NoError(t, err)
	e.finish(opID, storage.StateSucceeded, nil)
	rt := e.runtime(*st.RuntimeID)
	rt.Deleted = true
	_, err = e.store.Runtimes().UpdateRuntime(e.ctx, rt)
	require.NoError(t, err)
	got, err := e.svc.RuntimeOperationStatus(e.ctx, testTenant, opID)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.OperationStateSucceeded, got.State)
	_, err = e.svc.RuntimeStatus(e.ctx, testTenant, *st.RuntimeID)
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))
	_, err = e.svc.HibernateRuntime(e.ctx, testTenant, *st.RuntimeID)
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))
}

func TestOneOperationAtATime(t *testing.T) {
	e := newTestEnv(t)
	st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, validInput())
	require.NoError(t, err)
	_, err = e.svc.DeprovisionRuntime(e.ctx, testTenant, *st.RuntimeID)
	assert.Equal(t, apperr.CodeConflict, apperr.CodeOf(err))
	_, err = e.svc.HibernateRuntime(e.ctx, testTenant, *st.RuntimeID)
	assert.Equal(t, apperr.CodeConflict, apperr.CodeOf(err))
	e.finish(*st.ID, storage.StateFailed, nil)
	_, err = e.svc.DeprovisionRuntime(e.ctx, testTenant, *st.RuntimeID)
	require.NoError(t, err, "a failed provisioning can be deprovisioned")
}

func TestConnectionStatus(t *testing.T) {
	e := newTestEnv(t)
	st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, validInput())
	require.NoError(t, err)
	id := *st.RuntimeID
	connection := func() *gqlschema.RuntimeConnectionStatus {
		t.Helper()
		s, err := e.svc.RuntimeStatus(e.ctx, testTenant, id)
		require.NoError(t, err)
		return s.RuntimeConnectionStatus
	}
	agentConnected := func(op *storage.Operation) {
		op.Progress.Steps = map[string]storage.StepProgress{"Wait_For_Agent_To_Connect": {FirstAttempt: t0, Attempts: 1, Done: true}}
	}

	assert.Equal(t, &gqlschema.RuntimeConnectionStatus{Status: gqlschema.RuntimeAgentConnectionStatusPending}, connection(),
		"provisioning in progress")

	e.finish(*st.ID, storage.StateSucceeded, agentConnected)
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, connection().Status)

	// Operations that do not touch the agent do not change it.
	hib, err := e.svc.HibernateRuntime(e.ctx, testTenant, id)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, connection().Status)
	e.finish(*hib.ID, storage.StateFailed, func(op *storage.Operation) { op.LastError = "hibernation failed" })
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, connection().Status)

	// The newest reconnect decides.
	rec, err := e.svc.ReconnectRuntimeAgent(e.ctx, testTenant, id)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusPending, connection().Status)
	e.finish(rec, storage.StateFailed, func(op *storage.Operation) {
		op.LastError = "stage WaitForAgentToConnect exceeded its time limit of 15m0s"
	})
	msg := "stage WaitForAgentToConnect exceeded its time limit of 15m0s"
	assert.Equal(t, &gqlschema.RuntimeConnectionStatus{
		Status: gqlschema.RuntimeAgentConnectionStatusDisconnected, Errors: []*gqlschema.Error{{Message: &msg}},
	}, connection())

	rec, err = e.svc.ReconnectRuntimeAgent(e.ctx, testTenant, id)
	require.NoError(t, err)
	e.finish(rec, storage.StateSucceeded, agentConnected)
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, connection().Status)

	t.Run("a failed provisioning is disconnected", func(t *testing.T) {
		st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, validInput())
		require.NoError(t, err)
		e.finish(*st.ID, storage.StateFailed, func(op *storage.Operation) { op.LastError = "cluster creation failed: boom" })
		s, err := e.svc.RuntimeStatus(e.ctx, testTenant, *st.RuntimeID)
		require.NoError(t, err)
		require.Equal(t, gqlschema.RuntimeAgentConnectionStatusDisconnected, s.RuntimeConnectionStatus.Status)
		require.Len(t, s.RuntimeConnectionStatus.Errors, 1)
		assert.Equal(t, "cluster creation failed: boom", *s.RuntimeConnectionStatus.Errors[0].Message)
		assert.Equal(t, gqlschema.OperationStateFailed, s.LastOperationStatus.State)
	})

	t.Run("runtime status shows the newest operation and the kubeconfig", func(t *testing.T) {
		rt := e.runtime(id)
		rt.Secrets[operations.KubeconfigKey] = "apiVersion: v1\nkind: Config\n"
		_, err := e.store.Runtimes().UpdateRuntime(e.ctx, rt)
		require.NoError(t, err)
		s, err := e.svc.RuntimeStatus(e.ctx, testTenant, id)
		require.NoError(t, err)
		assert.Equal(t, rec, *s.LastOperationStatus.ID)
		assert.Equal(t, gqlschema.OperationTypeReconnectRuntime, s.LastOperationStatus.Operation)
		require.NotNil(t, s.RuntimeConfiguration.Kubeconfig)
		assert.Equal(t, "apiVersion: v1\nkind: Config\n", *s.RuntimeConfiguration.Kubeconfig)
	})
}

// The light status read (RuntimeOperationStatus) answers exactly what the status built from the
// whole operation and runtime does, for every type, state, with and without Kyma, with and
// without a Compass ID, for live and deleted runtimes.
func TestLightStatusEqualsFull(t *testing.T) {
	e := newTestEnv(t)
	states := []storage.OperationState{storage.StatePending, storage.StateInProgress, storage.StateSucceeded, storage.StateFailed}
	types := []string{operations.TypeProvision, operations.TypeDeprovision, operations.TypeUpgradeRuntime, operations.TypeUpgradeShoot,
		operations.TypeHibernate, operations.TypeReconnect}
	compared := 0
	for _, in := range []gqlschema.ProvisionRuntimeInput{validInput(), noKyma()} {
		for _, compassID := range []string{"", "compass-1"} {
			for _, deleted := range []bool{false, true} {
				id := e.provision(in)
				_, err := storage.ModifyRuntime(e.ctx, e.store.Runtimes(), id, func(rt *storage.Runtime) error {
					rt.CompassRuntimeID, rt.Deleted = compassID, deleted
					return nil
				})
				require.NoError(t, err)
				rt := e.runtime(id)
				cfg, err := operations.DecodeRuntimeConfig(rt)
				require.NoError(t, err)
				for _, typ := range types {
					for _, state := range states {
						op, err := engine.NewOperation(typ, id, operations.Data{RuntimeID: id, Tenant: testTenant, Config: cfg}, time.Hour, e.svc.now())
						require.NoError(t, err)
						op.State, op.Description, op.Stage = state, "at "+string(state), "Stage-"+typ
						if state == storage.StateFailed {
							op.LastError = "failed in " + typ
						}
						_, err = e.store.Operations().InsertOperation(e.ctx, op)
						require.NoError(t, err)
						full, err := e.store.Operations().GetOperation(e.ctx, op.ID)
						require.NoError(t, err)
						want, err := operationStatus(full, rt)
						require.NoError(t, err)
						got, err := e.svc.RuntimeOperationStatus(e.ctx, testTenant, op.ID)
						require.NoError(t, err)
						assert.Equal(t, want, got, "%s %s kyma=%v compass=%q deleted=%v", typ, state, cfg.Kyma != nil, compassID, deleted)
						compared++
					}
				}
			}
		}
	}
	assert.Equal(t, 2*2*2*6*4, compared)
}
