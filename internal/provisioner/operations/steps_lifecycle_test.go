package operations_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCleanupCluster(t *testing.T) {
	const retryTime = 5 * time.Minute
	step := func(e *env) operations.CleanupCluster {
		return operations.CleanupCluster{Deps: e.deps, RetryTime: retryTime}
	}

	t.Run("success deletes Kyma from the runtime", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		op, wait, err := step(e).Run(e.ctx, stepOp("Cleanup_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		assert.Equal(t, 1, e.rt.snapshot().deleteCalls)
		assert.Equal(t, []string{kubeconfig}, e.clusters.Opened())
	})

	t.Run("a runtime in a namespace of its own: Kyma deleted there only when modules are installed", func(t *testing.T) {
		for _, installs := range []bool{true, false} {
			e := newEnv(t)
			cc := &confinedClusters{fakeClusters: e.clusters, installs: installs}
			e.deps.Clusters = cc
			data := e.runtimeData("rt-1", true, true)
			_, err := storage.ModifyRuntime(e.ctx, e.store.Runtimes(), "rt-1", func(rt *storage.Runtime) error {
				rt.Allocation = json.RawMessage(`{"host": "http://node.localhost", "namespace": "cloud-runtime-rt-1"}`)
				return nil
			})
			require.NoError(t, err)
			op, wait, err := step(e).Run(e.ctx, stepOp("Cleanup_Cluster", t0, data), testLog())
			require.NoError(t, err)
			assert.Zero(t, wait)
			assert.Empty(t, op.LastError)
			if installs {
				assert.Equal(t, []string{"cloud-runtime-rt-1"}, cc.namespaces, "opened confined to its namespace")
				assert.Equal(t, 1, e.rt.snapshot().deleteCalls)
			} else {
				assert.Empty(t, e.clusters.Opened(), "Kyma was never installed: nothing to clean up")
				assert.Zero(t, e.rt.snapshot().deleteCalls)
			}
		}
	})

	t.Run("a runtime without kubeconfig has nothing to clean up", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		_, wait, err := step(e).Run(e.ctx, stepOp("Cleanup_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, e.clusters.Opened())
	})

	t.Run("error within the retry time: retry", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.rt.set(func(r *fakeRuntime) { r.deleteErr = errTransient })
		op := stepOp("Cleanup_Cluster", t0.Add(retryTime-time.Second), data)
		op.Progress.Steps = map[string]storage.StepProgress{"Cleanup_Cluster": {FirstAttempt: t0, Attempts: 3}}
		op, wait, err := step(e).Run(e.ctx, op, testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "deleting Kyma from the runtime: "+errTransient.Error())
		assert.Empty(t, op.Progress.ExecutedButNotCompleted)
	})

	t.Run("opening the cluster fails within the retry time: retry", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.clusters.err = errTransient
		op, wait, err := step(e).Run(e.ctx, stepOp("Cleanup_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, errTransient.Error())
	})

	t.Run("after the retry time it gives up without failing", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.rt.set(func(r *fakeRuntime) { r.deleteErr = errTransient })
		op := stepOp("Cleanup_Cluster", t0.Add(retryTime), data)
		op.Progress.Steps = map[string]storage.StepProgress{"Cleanup_Cluster": {FirstAttempt: t0, Attempts: 30}}
		op, wait, err := step(e).Run(e.ctx, op, testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, []string{"Cleanup_Cluster"}, op.Progress.ExecutedButNotCompleted)
		assert.Contains(t, op.LastError, "deleting Kyma from the runtime")

		// Giving up again does not list the step twice.
		op, _, err = step(e).Run(e.ctx, op.ForStep("Cleanup_Cluster", t0.Add(2*retryTime)), testLog())
		require.NoError(t, err)
		assert.Equal(t, []string{"Cleanup_Cluster"}, op.Progress.ExecutedButNotCompleted)
	})

	t.Run("a missing runtime gives up after the retry time too", func(t *testing.T) {
		e := newEnv(t)
		data := operations.Data{RuntimeID: "missing", Tenant: tenant, Backend: backendName}
		op, wait, err := step(e).Run(e.ctx, stepOp("Cleanup_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "reading runtime")

		op.Progress.Steps = map[string]storage.StepProgress{"Cleanup_Cluster": {FirstAttempt: t0}}
		op, wait, err = step(e).Run(e.ctx, op.ForStep("Cleanup_Cluster", t0.Add(retryTime+time.Second)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, []string{"Cleanup_Cluster"}, op.Progress.ExecutedButNotCompleted)
	})
}

func TestDeprovisionCluster(t *testing.T) {
	step := func(e *env) operations.DeprovisionCluster { return operations.DeprovisionCluster{Deps: e.deps} }

	t.Run("success asks the backend to delete, remembering when", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		data.RequestedAt = map[string]time.Time{"create": t0.Add(-time.Hour)}
		op, wait, err := step(e).Run(e.ctx, stepOp("Deprovision_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, t0, op.Data.RequestedAt["delete"])
		calls := e.backend.Calls("Delete")
		require.Len(t, calls, 1)
		assert.Equal(t, infrastructure.RequestDelete, calls[0].Request)
		assert.Equal(t, t0, calls[0].RequestedAt)
		assert.Equal(t, "rt-1", calls[0].RuntimeID)
	})

	t.Run("error: retry, the first request time is kept", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.backend.set(func(b *fakeBackend) { b.deleteErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Deprovision_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "deleting cluster: "+errTransient.Error())
		e.backend.set(func(b *fakeBackend) { b.deleteErr = nil })
		op, wait, err = step(e).Run(e.ctx, op.ForStep("Deprovision_Cluster", t0.Add(time.Minute)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, t0, op.Data.RequestedAt["delete"])
		assert.Equal(t, t0, e.backend.Calls("Delete")[1].RequestedAt)
	})

	t.Run("unknown backend fails", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		data.Backend = "gone"
		_, _, err := step(e).Run(e.ctx, stepOp("Deprovision_Cluster", t0, data), testLog())
		require.ErrorIs(t, err, infrastructure.ErrUnknownBackend)
	})
}

func TestWaitForClusterDeletion(t *testing.T) {
	step := func(e *env) operations.WaitForClusterDeletion { return operations.WaitForClusterDeletion{Deps: e.deps} }
	deleting := func(e *env) operations.Data {
		data := e.runtimeData("rt-1", true, true)
		data.CompassRuntimeID = "compass-1"
		data.RequestedAt = map[string]time.Time{"delete": t0}
		return data
	}

	t.Run("gone: unregisters, marks the runtime deleted and drops its kubeconfig", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.deleted = true })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Deletion", t0.Add(time.Minute), deleting(e)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		assert.Equal(t, []string{"compass-1"}, e.director.snapshot().unregistered)
		rt := e.runtime("rt-1")
		assert.True(t, rt.Deleted)
		_, hasKubeconfig := rt.Secrets[operations.KubeconfigKey]
		assert.False(t, hasKubeconfig)
		assert.Equal(t, "s3cret", rt.Secrets["kyma/_global/password"])
		calls := e.backend.Calls("Deleted")
		require.Len(t, calls, 1)
		assert.Equal(t, infrastructure.RequestDelete, calls[0].Request)
		assert.Equal(t, t0, calls[0].RequestedAt)
	})

	t.Run("never registered: no Director call", func(t *testing.T) {
		e := newEnv(t)
		data := deleting(e)
		data.CompassRuntimeID = ""
		e.backend.set(func(b *fakeBackend) { b.deleted = true })
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Deletion", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, e.director.snapshot().unregistered)
		assert.True(t, e.runtime("rt-1").Deleted)
	})

	t.Run("not gone yet: retry, runtime untouched", func(t *testing.T) {
		e := newEnv(t)
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Deletion", t0, deleting(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Equal(t, "waiting for the cluster to be deleted", op.LastError)
		rt := e.runtime("rt-1")
		assert.False(t, rt.Deleted)
		assert.Equal(t, kubeconfig, rt.Secrets[operations.KubeconfigKey])
		assert.Empty(t, e.director.snapshot().unregistered)
	})

	t.Run("check error: retry", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.deletedErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Deletion", t0, deleting(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "checking cluster deletion: "+errTransient.Error())
		assert.False(t, e.runtime("rt-1").Deleted)
	})

	t.Run("unregister error: retry, runtime not marked deleted", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.deleted = true })
		e.director.set(func(d *fakeDirector) { d.unregisterErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Deletion", t0, deleting(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "Director: unregistering the runtime")
		assert.False(t, e.runtime("rt-1").Deleted)
	})

	t.Run("store error: retry", func(t *testing.T) {
		e := newEnv(t)
		data := deleting(e)
		e.backend.set(func(b *fakeBackend) { b.deleted = true })
		e.deps.Runtimes = &faultyRuntimes{Runtimes: e.store.Runtimes(), updateErr: errTransient, failUpdates: -1}
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Deletion", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "marking runtime deleted")
		assert.False(t, e.runtime("rt-1").Deleted)
	})
}

// upgradeData is an upgradeShoot operation's data: the runtime is stored with the old
// configuration, the operation works towards a new machine type and Kubernetes version.
func (e *env) upgradeData() (operations.Data, operations.RuntimeConfig) {
	e.t.Helper()
	old := testConfig(true)
	e.insertRuntime("rt-1", old, storage.Secrets{operations.KubeconfigKey: kubeconfig})
	rt := e.runtime("rt-1")
	raw, err := json.Marshal(old)
	require.NoError(e.t, err)
	rt.Config = raw
	_, err = e.store.Runtimes().UpdateRuntime(e.ctx, rt)
	require.NoError(e.t, err)
	newCfg := testConfig(true)
	newCfg.Cluster.MachineType, newCfg.Cluster.KubernetesVersion, newCfg.Cluster.AutoScalerMax = "n2-standard-8", "1.32", 5
	return operations.Data{RuntimeID: "rt-1", Tenant: tenant, Backend: backendName, Config: newCfg, CompassRuntimeID: "compass-1"}, old
}

func (e *env) storedConfig(id string) operations.RuntimeConfig {
	e.t.Helper()
	cfg, err := operations.DecodeRuntimeConfig(e.runtime(id))
	require.NoError(e.t, err)
	return cfg
}

func TestUpgradeShoot(t *testing.T) {
	step := func(e *env) operations.UpgradeShoot { return operations.UpgradeShoot{Deps: e.deps} }

	t.Run("success applies the new cluster configuration and keeps the revision to wait for", func(t *testing.T) {
		e := newEnv(t)
		data, old := e.upgradeData()
		e.backend.set(func(b *fakeBackend) { b.updateRev = 7 })
		op, wait, err := step(e).Run(e.ctx, stepOp("Upgrade_Shoot", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, int64(7), op.Data.TargetRevision)
		assert.Equal(t, t0, op.Data.RequestedAt["update"])
		calls := e.backend.Calls("Update")
		require.Len(t, calls, 1)
		assert.Equal(t, infrastructure.RequestUpdate, calls[0].Request)
		assert.Equal(t, data.Config.Cluster, calls[0].Cluster)
		assert.Equal(t, old, e.storedConfig("rt-1"), "the runtime keeps its configuration until the upgrade is done")
	})

	t.Run("error: retry, no revision", func(t *testing.T) {
		e := newEnv(t)
		data, _ := e.upgradeData()
		e.backend.set(func(b *fakeBackend) { b.updateErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Upgrade_Shoot", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "updating cluster: "+errTransient.Error())
		assert.Zero(t, op.Data.TargetRevision)
	})

	t.Run("unknown backend fails", func(t *testing.T) {
		e := newEnv(t)
		data, _ := e.upgradeData()
		data.Backend = "gone"
		_, _, err := step(e).Run(e.ctx, stepOp("Upgrade_Shoot", t0, data), testLog())
		require.ErrorIs(t, err, infrastructure.ErrUnknownBackend)
	})
}

func TestWaitForShootUpgrade(t *testing.T) {
	step := func(e *env) operations.WaitForShootUpgrade { return operations.WaitForShootUpgrade{Deps: e.deps} }
	updating := func(e *env) (operations.Data, operations.RuntimeConfig) {
		data, old := e.upgradeData()
		data.TargetRevision = 7
		data.RequestedAt = map[string]time.Time{"update": t0}
		return data, old
	}

	t.Run("reconciled: the new configuration becomes the runtime's", func(t *testing.T) {
		e := newEnv(t)
		data, _ := updating(e)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded, ObservedRevision: 7}
		})
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Shoot_Upgrade", t0.Add(time.Minute), data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		assert.Equal(t, data.Config, e.storedConfig("rt-1"))
		calls := e.backend.Calls("Status")
		require.Len(t, calls, 1)
		assert.Equal(t, infrastructure.RequestUpdate, calls[0].Request)
		assert.Equal(t, t0, calls[0].RequestedAt)
	})

	t.Run("older revision or in progress: retry, configuration unchanged", func(t *testing.T) {
		for _, st := range []infrastructure.Status{
			{Phase: infrastructure.PhaseSucceeded, ObservedRevision: 6},
			{Phase: infrastructure.PhaseInProgress, ObservedRevision: 7},
		} {
			e := newEnv(t)
			data, old := updating(e)
			e.backend.set(func(b *fakeBackend) { b.status = st })
			op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Shoot_Upgrade", t0, data), testLog())
			require.NoError(t, err)
			assert.Equal(t, pollInterval, wait, "%+v", st)
			assert.Equal(t, "waiting for the cluster upgrade", op.LastError)
			assert.Equal(t, old, e.storedConfig("rt-1"))
		}
	})

	t.Run("status error: retry", func(t *testing.T) {
		e := newEnv(t)
		data, _ := updating(e)
		e.backend.set(func(b *fakeBackend) { b.statusErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Shoot_Upgrade", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "reading cluster status")
	})

	t.Run("store error: retry", func(t *testing.T) {
		e := newEnv(t)
		data, old := updating(e)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded, ObservedRevision: 8}
		})
		e.deps.Runtimes = &faultyRuntimes{Runtimes: e.store.Runtimes(), updateErr: errTransient, failUpdates: -1}
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Shoot_Upgrade", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "storing runtime configuration")
		assert.Equal(t, old, e.storedConfig("rt-1"))
	})

	t.Run("failed phase fails naming the reason", func(t *testing.T) {
		e := newEnv(t)
		data, old := updating(e)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseFailed, Reason: "invalid machine type"}
		})
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Shoot_Upgrade", t0, data), testLog())
		require.EqualError(t, err, "cluster upgrade failed: invalid machine type")
		assert.Zero(t, wait)
		assert.Equal(t, old, e.storedConfig("rt-1"))
	})
}

func TestUpdateUpgradeState(t *testing.T) {
	step := func(e *env) operations.UpdateUpgradeState { return operations.UpdateUpgradeState{Deps: e.deps} }
	upgraded := func(e *env) (operations.Data, operations.RuntimeConfig) {
		data, old := e.upgradeData()
		data.Config = old
		data.Config.Kyma = &operations.Kyma{Version: "2.21.0", Components: []operations.Component{{Name: "istio", Namespace: "istio-system"}}}
		return data, old
	}

	t.Run("success records the upgraded Kyma as the runtime's", func(t *testing.T) {
		e := newEnv(t)
		data, _ := upgraded(e)
		op, wait, err := step(e).Run(e.ctx, stepOp("Update_Upgrade_State", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		stored := e.storedConfig("rt-1")
		assert.Equal(t, data.Config, stored)
		assert.Equal(t, "2.21.0", stored.Kyma.Version)
	})

	t.Run("store error: retry, the old configuration stays", func(t *testing.T) {
		e := newEnv(t)
		data, old := upgraded(e)
		e.deps.Runtimes = &faultyRuntimes{Runtimes: e.store.Runtimes(), updateErr: errTransient, failUpdates: -1}
		op, wait, err := step(e).Run(e.ctx, stepOp("Update_Upgrade_State", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "storing runtime configuration: "+errTransient.Error())
		assert.Equal(t, old, e.storedConfig("rt-1"))
	})
}

func TestHibernateCluster(t *testing.T) {
	step := func(e *env) operations.HibernateCluster { return operations.HibernateCluster{Deps: e.deps} }

	t.Run("success asks the backend to hibernate", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		op, wait, err := step(e).Run(e.ctx, stepOp("Hibernate_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, t0, op.Data.RequestedAt["hibernate"])
		calls := e.backend.Calls("Hibernate")
		require.Len(t, calls, 1)
		assert.Equal(t, infrastructure.RequestHibernate, calls[0].Request)
		assert.Equal(t, t0, calls[0].RequestedAt)
	})

	t.Run("transient error: retry", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.backend.set(func(b *fakeBackend) { b.hibernateErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Hibernate_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "hibernating cluster: "+errTransient.Error())
	})

	t.Run("not supported by the backend fails", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.backend.set(func(b *fakeBackend) {
			b.hibernateErr = fmt.Errorf("static pool runs on shared hosts: %w", infrastructure.ErrNotSupported)
		})
		_, wait, err := step(e).Run(e.ctx, stepOp("Hibernate_Cluster", t0, data), testLog())
		require.ErrorIs(t, err, infrastructure.ErrNotSupported)
		assert.Contains(t, err.Error(), "hibernating cluster")
		assert.Zero(t, wait)
	})

	t.Run("unknown backend fails", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		data.Backend = "gone"
		_, _, err := step(e).Run(e.ctx, stepOp("Hibernate_Cluster", t0, data), testLog())
		require.ErrorIs(t, err, infrastructure.ErrUnknownBackend)
	})
}

func TestWaitForHibernation(t *testing.T) {
	step := func(e *env) operations.WaitForHibernation { return operations.WaitForHibernation{Deps: e.deps} }
	hibernating := func(e *env) operations.Data {
		data := e.runtimeData("rt-1", true, true)
		data.RequestedAt = map[string]time.Time{"hibernate": t0}
		return data
	}

	t.Run("hibernated succeeds", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded, Hibernated: true}
		})
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Hibernation", t0.Add(time.Minute), hibernating(e)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		calls := e.backend.Calls("Status")
		require.Len(t, calls, 1)
		assert.Equal(t, infrastructure.RequestHibernate, calls[0].Request)
		assert.Equal(t, t0, calls[0].RequestedAt)
	})

	t.Run("not hibernated yet: retry", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress} })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Hibernation", t0, hibernating(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Equal(t, "waiting for the cluster to hibernate", op.LastError)
	})

	t.Run("status error: retry", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.statusErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Hibernation", t0, hibernating(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "reading cluster status")
	})

	t.Run("failed phase fails naming the reason", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseFailed, Reason: "workers did not drain"}
		})
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Hibernation", t0, hibernating(e)), testLog())
		require.EqualError(t, err, "hibernation failed: workers did not drain")
		assert.Zero(t, wait)
	})
}
