package operations_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runtimeData inserts runtime id (with a kubeconfig when ready) and returns the Data of an
// operation on it.
func (e *env) runtimeData(id string, kyma, ready bool) operations.Data {
	e.t.Helper()
	secrets := storage.Secrets{"kyma/_global/password": "s3cret"}
	if ready {
		secrets[operations.KubeconfigKey] = kubeconfig
	}
	e.insertRuntime(id, testConfig(kyma), secrets)
	return operations.Data{RuntimeID: id, Tenant: tenant, Backend: backendName, Config: testConfig(kyma)}
}

func TestRegisterRuntime(t *testing.T) {
	step := func(e *env) operations.RegisterRuntime { return operations.RegisterRuntime{Deps: e.deps} }

	t.Run("success stores the Compass ID in the runtime and the data", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		op, wait, err := step(e).Run(e.ctx, stepOp("Register_Runtime", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		assert.Equal(t, "compass-1", op.Data.CompassRuntimeID)
		assert.Equal(t, "compass-1", e.runtime("rt-1").CompassRuntimeID)
		calls := e.director.snapshot().registered
		require.Len(t, calls, 1)
		assert.Equal(t, registerCall{Tenant: tenant, RuntimeID: "rt-1", Name: "c-test", Condition: "PROVISIONING",
			Labels: map[string]any{"subaccount": "sub-1"}}, calls[0], "registered with its condition")
		assert.Empty(t, e.director.snapshot().conditions, "in the registration")
	})

	t.Run("already registered: the Director is not asked again", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		data.CompassRuntimeID = "compass-0"
		op, wait, err := step(e).Run(e.ctx, stepOp("Register_Runtime", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, "compass-0", op.Data.CompassRuntimeID)
		assert.Empty(t, e.director.snapshot().registered)
		assert.Empty(t, e.director.snapshot().conditions)
	})

	t.Run("Director error: retry after the poll interval, nothing stored", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		e.director.set(func(d *fakeDirector) { d.registerErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Register_Runtime", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "Director: registering the runtime")
		assert.Contains(t, op.LastError, errTransient.Error())
		assert.Empty(t, op.Data.CompassRuntimeID)
		assert.Empty(t, e.runtime("rt-1").CompassRuntimeID)
	})

	t.Run("the ID is stored in one write, whatever the runtime's version, keeping its secrets", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		_, err := storage.ModifyRuntime(e.ctx, e.store.Runtimes(), "rt-1", func(rt *storage.Runtime) error {
			rt.Secrets = storage.Secrets{operations.KubeconfigKey: "kc"}
			return nil
		})
		require.NoError(t, err)
		faulty := &faultyRuntimes{Runtimes: e.store.Runtimes()}
		e.deps.Runtimes = faulty
		op, wait, err := step(e).Run(e.ctx, stepOp("Register_Runtime", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, "compass-1", op.Data.CompassRuntimeID)
		assert.Equal(t, "compass-1", e.runtime("rt-1").CompassRuntimeID)
		assert.Equal(t, "kc", e.runtime("rt-1").Secrets[operations.KubeconfigKey])
		assert.Equal(t, 1, faulty.updates)
	})

	t.Run("storing the ID fails: retry, the data keeps no ID so the next run stores it", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		e.deps.Runtimes = &faultyRuntimes{Runtimes: e.store.Runtimes(), updateErr: storage.ErrConflict, failUpdates: -1}
		op, wait, err := step(e).Run(e.ctx, stepOp("Register_Runtime", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "storing the Compass runtime ID")
		assert.Empty(t, op.Data.CompassRuntimeID)
		assert.Empty(t, e.runtime("rt-1").CompassRuntimeID)
	})
}

func TestCreateCluster(t *testing.T) {
	step := func(e *env) operations.CreateCluster { return operations.CreateCluster{Deps: e.deps} }

	t.Run("success asks the backend with a create spec and remembers when", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		op := stepOp("Create_Cluster", t0, data)
		op.ID = "op-create"
		op, wait, err := step(e).Run(e.ctx, op, testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, t0, op.Data.RequestedAt["create"])
		calls := e.backend.Calls("Create")
		require.Len(t, calls, 1)
		assert.Equal(t, infrastructure.Spec{
			RuntimeID: "rt-1", OperationID: "op-create", Name: "c-test", Tenant: tenant, SubAccountID: "sub-1",
			Cluster: testConfig(true).Cluster, Request: infrastructure.RequestCreate, RequestedAt: t0,
			Slots: 1, Version: testConfig(true).Kyma.Version, // autoScalerMin, the requested Kyma version
		}, calls[0])
	})

	t.Run("transient error: retry, RequestedAt kept across reruns", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		e.backend.set(func(b *fakeBackend) { b.createErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Create_Cluster", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "creating cluster: "+errTransient.Error())
		assert.Equal(t, t0, op.Data.RequestedAt["create"])

		e.backend.set(func(b *fakeBackend) { b.createErr = nil })
		later := t0.Add(3 * time.Minute)
		op, wait, err = step(e).Run(e.ctx, op.ForStep("Create_Cluster", later), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, t0, op.Data.RequestedAt["create"], "the first request time survives a rerun")
		calls := e.backend.Calls("Create")
		require.Len(t, calls, 2)
		assert.Equal(t, t0, calls[1].RequestedAt)
	})

	t.Run("no capacity fails the operation", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		e.backend.set(func(b *fakeBackend) {
			b.createErr = fmt.Errorf("static pool %q is full: %w", "pool", infrastructure.ErrNoCapacity)
		})
		_, wait, err := step(e).Run(e.ctx, stepOp("Create_Cluster", t0, data), testLog())
		require.Error(t, err)
		assert.ErrorIs(t, err, infrastructure.ErrNoCapacity)
		assert.Contains(t, err.Error(), "creating cluster")
		assert.Zero(t, wait)
	})

	t.Run("unknown backend fails the operation", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		data.Backend = "gone"
		_, _, err := step(e).Run(e.ctx, stepOp("Create_Cluster", t0, data), testLog())
		require.Error(t, err)
		assert.ErrorIs(t, err, infrastructure.ErrUnknownBackend)
		assert.Contains(t, err.Error(), `"gone"`)
		assert.Empty(t, e.backend.Calls("Create"))
	})
}

func TestWaitForClusterDomain(t *testing.T) {
	step := func(e *env) operations.WaitForClusterDomain { return operations.WaitForClusterDomain{Deps: e.deps} }
	created := func(e *env) operations.Data {
		data := e.runtimeData("rt-1", true, false)
		data.CompassRuntimeID = "compass-1"
		data.RequestedAt = map[string]time.Time{"create": t0}
		return data
	}

	t.Run("success stores the domain and labels the runtime in the Director", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Domain: "c-test.kyma.example", Phase: infrastructure.PhaseInProgress}
		})
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Domain", t0.Add(time.Minute), created(e)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, "c-test.kyma.example", op.Data.ClusterDomain)
		status := e.backend.Calls("Status")
		require.Len(t, status, 1)
		assert.Equal(t, infrastructure.RequestCreate, status[0].Request)
		assert.Equal(t, t0, status[0].RequestedAt, "asks about the create request made at t0")
		assert.Equal(t, []labelsCall{{Tenant: tenant, CompassID: "compass-1", Labels: map[string]string{
			"gardenerClusterName": "c-test", "gardenerClusterDomain": "c-test.kyma.example",
			"runtime_consoleUrl": "https://console.c-test.kyma.example",
		}}}, e.director.snapshot().labelled)
	})

	t.Run("no domain yet: retry, Director not called", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress} })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Domain", t0, created(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Equal(t, "waiting for the cluster's domain", op.LastError)
		assert.Empty(t, op.Data.ClusterDomain)
		assert.Empty(t, e.director.snapshot().labelled)
	})

	t.Run("status error: retry", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.statusErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Domain", t0, created(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "reading cluster status: "+errTransient.Error())
	})

	t.Run("failed phase fails naming the reason", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseFailed, Reason: "quota exceeded in europe-west3"}
		})
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Domain", t0, created(e)), testLog())
		require.EqualError(t, err, "cluster creation failed: quota exceeded in europe-west3")
		assert.Zero(t, wait)
		assert.Empty(t, e.director.snapshot().labelled)
	})

	t.Run("labelling fails: retry keeps the domain and does not ask the backend again", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.status = infrastructure.Status{Domain: "d.example"} })
		e.director.set(func(d *fakeDirector) { d.labelsErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Domain", t0, created(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "Director: labelling the runtime")
		assert.Equal(t, "d.example", op.Data.ClusterDomain)

		e.director.set(func(d *fakeDirector) { d.labelsErr = nil })
		op, wait, err = step(e).Run(e.ctx, op.ForStep("Wait_For_Cluster_Domain", t0.Add(pollInterval)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Len(t, e.backend.Calls("Status"), 1)
		assert.Len(t, e.director.snapshot().labelled, 2)
	})
}

func TestWaitForClusterCreation(t *testing.T) {
	step := func(e *env) operations.WaitForClusterCreation { return operations.WaitForClusterCreation{Deps: e.deps} }
	created := func(e *env) operations.Data {
		data := e.runtimeData("rt-1", true, false)
		data.RequestedAt = map[string]time.Time{"create": t0}
		return data
	}

	t.Run("success stores the kubeconfig encrypted with the runtime, keeping other secrets", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded, Domain: "d"}
		})
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0.Add(time.Minute), created(e)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		rt := e.runtime("rt-1")
		assert.Equal(t, kubeconfig, rt.Secrets[operations.KubeconfigKey])
		assert.Equal(t, "s3cret", rt.Secrets["kyma/_global/password"])
		kc := e.backend.Calls("Kubeconfig")
		require.Len(t, kc, 1)
		assert.Equal(t, t0, kc[0].RequestedAt)
		assert.Empty(t, op.Secrets, "the kubeconfig is not kept in the operation")
	})

	t.Run("success on a runtime without secrets", func(t *testing.T) {
		e := newEnv(t)
		e.insertRuntime("rt-2", testConfig(false), nil)
		data := operations.Data{RuntimeID: "rt-2", Tenant: tenant, Backend: backendName, Config: testConfig(false)}
		e.backend.set(func(b *fakeBackend) { b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded} })
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, kubeconfig, e.runtime("rt-2").Secrets[operations.KubeconfigKey])
	})

	t.Run("the allocation is stored with the runtime; no kubeconfig to hand out stores none", func(t *testing.T) {
		e := newEnv(t)
		e.insertRuntime("rt-3", testConfig(false), nil)
		data := operations.Data{RuntimeID: "rt-3", Tenant: tenant, Backend: backendName, Config: testConfig(false)}
		e.backend.set(func(b *fakeBackend) {
			b.kubeconfig = ""
			b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded, Domain: "localhost", Allocation: &infrastructure.Allocation{
				Host: "http://localhost:9091", AudienceURL: "http://localhost:8081", DataDir: "/mnt/data", Slots: 1}}
		})
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		rt := e.runtime("rt-3")
		assert.NotContains(t, rt.Secrets, operations.KubeconfigKey)
		assert.JSONEq(t, `{"host": "http://localhost:9091", "audienceURL": "http://localhost:8081", "dataDir": "/mnt/data", "slots": 1}`, string(rt.Allocation))
	})

	t.Run("neither a kubeconfig nor an allocation: nothing is written", func(t *testing.T) {
		e := newEnv(t)
		e.insertRuntime("rt-4", testConfig(false), nil)
		before := e.runtime("rt-4")
		data := operations.Data{RuntimeID: "rt-4", Tenant: tenant, Backend: backendName, Config: testConfig(false)}
		e.backend.set(func(b *fakeBackend) {
			b.kubeconfig = ""
			b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded, Domain: "localhost"}
		})
		faulty := &faultyRuntimes{Runtimes: e.store.Runtimes()}
		e.deps.Runtimes = faulty
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Zero(t, faulty.updates)
		assert.Equal(t, before.Version, e.runtime("rt-4").Version)
	})

	t.Run("in progress: retry, no kubeconfig stored", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) { b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress} })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0, created(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Equal(t, "waiting for the cluster to be created", op.LastError)
		assert.Empty(t, e.runtime("rt-1").Secrets[operations.KubeconfigKey])
		assert.Empty(t, e.backend.Calls("Kubeconfig"))
	})

	t.Run("status or kubeconfig errors: retry", func(t *testing.T) {
		e := newEnv(t)
		data := created(e)
		e.backend.set(func(b *fakeBackend) { b.statusErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "reading cluster status")

		e.backend.set(func(b *fakeBackend) {
			b.statusErr, b.kubeErr = nil, errTransient
			b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded}
		})
		op, wait, err = step(e).Run(e.ctx, op.ForStep("Wait_For_Cluster_Creation", t0.Add(pollInterval)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "reading the cluster's kubeconfig")
		assert.Empty(t, e.runtime("rt-1").Secrets[operations.KubeconfigKey])
	})

	t.Run("failed phase fails naming the reason", func(t *testing.T) {
		e := newEnv(t)
		e.backend.set(func(b *fakeBackend) {
			b.status = infrastructure.Status{Phase: infrastructure.PhaseFailed, Reason: "machine type not available"}
		})
		_, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Cluster_Creation", t0, created(e)), testLog())
		require.EqualError(t, err, "cluster creation failed: machine type not available")
		assert.Zero(t, wait)
		assert.Empty(t, e.runtime("rt-1").Secrets[operations.KubeconfigKey])
	})
}

func TestCreateBindingsForOperators(t *testing.T) {
	step := func(e *env) operations.CreateBindingsForOperators {
		return operations.CreateBindingsForOperators{Deps: e.deps}
	}

	t.Run("success binds the administrators in the runtime opened from its kubeconfig", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		op, wait, err := step(e).Run(e.ctx, stepOp("Create_Bindings_For_Operators", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		assert.Equal(t, [][]string{{"admin@example.com"}}, e.rt.snapshot().admins)
		assert.Equal(t, []string{kubeconfig}, e.clusters.Opened())
	})

	t.Run("no administrators: nothing to do", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		data.Config.Administrators = nil
		_, wait, err := step(e).Run(e.ctx, stepOp("Create_Bindings_For_Operators", t0, data), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, e.clusters.Opened())
	})

	t.Run("no kubeconfig yet: retry", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		op, wait, err := step(e).Run(e.ctx, stepOp("Create_Bindings_For_Operators", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Equal(t, "opening the runtime: runtime rt-1 has no kubeconfig yet", op.LastError)
	})

	t.Run("binding error: retry", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.rt.set(func(r *fakeRuntime) { r.bindingsErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Create_Bindings_For_Operators", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "creating bindings for operators: "+errTransient.Error())
	})

	t.Run("kubeconfig cannot be opened: retry", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, true)
		e.clusters.err = errTransient
		op, wait, err := step(e).Run(e.ctx, stepOp("Create_Bindings_For_Operators", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "opening the runtime: "+errTransient.Error())
	})
}

func TestStartInstallation(t *testing.T) {
	for _, name := range []string{"Start_Installation", "Start_Upgrade"} {
		t.Run(name, func(t *testing.T) {
			step := func(e *env) operations.StartInstallation {
				return operations.StartInstallation{Deps: e.deps, StepName: name}
			}
			t.Run("name", func(t *testing.T) {
				assert.Equal(t, name, step(newEnv(t)).Name())
			})

			t.Run("success applies the Kyma resource and remembers when", func(t *testing.T) {
				e := newEnv(t)
				data := e.runtimeData("rt-1", true, true)
				op, wait, err := step(e).Run(e.ctx, stepOp(name, t0, data), testLog())
				require.NoError(t, err)
				assert.Zero(t, wait)
				assert.Equal(t, t0, op.Data.RequestedAt["install"])
				assert.Equal(t, []runtimeclient.KymaSpec{{Version: "2.20.0", Profile: "Evaluation", Modules: []modulespec.ModuleSpec{{Name: "istio"}, {Name: "serverless"}}}},
					e.rt.snapshot().applied)
			})

			t.Run("apply error: retry, the first request time is kept", func(t *testing.T) {
				e := newEnv(t)
				data := e.runtimeData("rt-1", true, true)
				e.rt.set(func(r *fakeRuntime) { r.applyErr = errTransient })
				op, wait, err := step(e).Run(e.ctx, stepOp(name, t0, data), testLog())
				require.NoError(t, err)
				assert.Equal(t, pollInterval, wait)
				assert.Contains(t, op.LastError, "applying the Kyma resource: "+errTransient.Error())
				assert.Equal(t, t0, op.Data.RequestedAt["install"])

				e.rt.set(func(r *fakeRuntime) { r.applyErr = nil })
				op, wait, err = step(e).Run(e.ctx, op.ForStep(name, t0.Add(time.Minute)), testLog())
				require.NoError(t, err)
				assert.Zero(t, wait)
				assert.Equal(t, t0, op.Data.RequestedAt["install"])
				assert.Len(t, e.rt.snapshot().applied, 2)
			})

			t.Run("no kubeconfig: retry without touching the cluster", func(t *testing.T) {
				e := newEnv(t)
				data := e.runtimeData("rt-1", true, false)
				op, wait, err := step(e).Run(e.ctx, stepOp(name, t0, data), testLog())
				require.NoError(t, err)
				assert.Equal(t, pollInterval, wait)
				assert.Contains(t, op.LastError, "has no kubeconfig yet")
				assert.Empty(t, e.rt.snapshot().applied)
			})
		})
	}

	t.Run("HasKyma is the installation condition", func(t *testing.T) {
		assert.True(t, operations.HasKyma(operations.Op{Data: operations.Data{Config: testConfig(true)}}))
		assert.False(t, operations.HasKyma(operations.Op{Data: operations.Data{Config: testConfig(false)}}))
	})
}

func TestWaitForInstallation(t *testing.T) {
	for _, name := range []string{"Wait_For_Installation", "Wait_For_Upgrade"} {
		t.Run(name, func(t *testing.T) {
			step := func(e *env) operations.WaitForInstallation {
				return operations.WaitForInstallation{Deps: e.deps, StepName: name}
			}
			applied := func(e *env) operations.Data {
				data := e.runtimeData("rt-1", true, true)
				data.RequestedAt = map[string]time.Time{"install": t0}
				return data
			}
			t.Run("name", func(t *testing.T) {
				assert.Equal(t, name, step(newEnv(t)).Name())
			})

			t.Run("Ready succeeds; the state is asked with the install time", func(t *testing.T) {
				e := newEnv(t)
				e.rt.set(func(r *fakeRuntime) { r.kymaState = runtimeclient.KymaReady })
				op, wait, err := step(e).Run(e.ctx, stepOp(name, t0.Add(5*time.Minute), applied(e)), testLog())
				require.NoError(t, err)
				assert.Zero(t, wait)
				assert.Empty(t, op.LastError)
				assert.Equal(t, []time.Time{t0}, e.rt.snapshot().kymaSince)
			})

			t.Run("Processing or missing: retry naming the state", func(t *testing.T) {
				for _, state := range []string{runtimeclient.KymaProcessing, ""} {
					e := newEnv(t)
					e.rt.set(func(r *fakeRuntime) { r.kymaState = state })
					op, wait, err := step(e).Run(e.ctx, stepOp(name, t0, applied(e)), testLog())
					require.NoError(t, err)
					assert.Equal(t, pollInterval, wait)
					assert.Equal(t, fmt.Sprintf("waiting for the Kyma installation (state %q)", state), op.LastError)
				}
			})

			t.Run("read error: retry", func(t *testing.T) {
				e := newEnv(t)
				e.rt.set(func(r *fakeRuntime) { r.kymaErr = errTransient })
				op, wait, err := step(e).Run(e.ctx, stepOp(name, t0, applied(e)), testLog())
				require.NoError(t, err)
				assert.Equal(t, pollInterval, wait)
				assert.Contains(t, op.LastError, "reading the Kyma resource: "+errTransient.Error())
			})

			t.Run("Error fails with the Kyma message", func(t *testing.T) {
				e := newEnv(t)
				e.rt.set(func(r *fakeRuntime) { r.kymaState, r.kymaMsg = runtimeclient.KymaError, "module istio: CRD conflict" })
				_, wait, err := step(e).Run(e.ctx, stepOp(name, t0, applied(e)), testLog())
				require.EqualError(t, err, "kyma installation failed: module istio: CRD conflict")
				assert.Zero(t, wait)
			})
		})
	}
}

func TestConnectRuntimeAgent(t *testing.T) {
	step := func(e *env) operations.ConnectRuntimeAgent { return operations.ConnectRuntimeAgent{Deps: e.deps} }
	registered := func(e *env) operations.Data {
		data := e.runtimeData("rt-1", true, true)
		data.CompassRuntimeID = "compass-1"
		return data
	}

	t.Run("success writes the agent configuration with the token's connector", func(t *testing.T) {
		e := newEnv(t)
		op, wait, err := step(e).Run(e.ctx, stepOp("Connect_Runtime_Agent", t0, registered(e)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Equal(t, t0, op.Data.RequestedAt["agent"])
		assert.Equal(t, []string{"compass-1"}, e.director.snapshot().tokens)
		assert.Equal(t, []runtimeclient.AgentConfig{{
			ConnectorURL: "https://connector.example/graphql", RuntimeID: "compass-1", Tenant: tenant, Token: "one-time",
		}}, e.rt.snapshot().written)
		assert.Equal(t, []conditionCall{{Tenant: tenant, CompassID: "compass-1", Condition: "CONNECTED"}}, e.director.snapshot().conditions)
	})

	t.Run("setting the condition fails: retry, the connection wait has not started", func(t *testing.T) {
		e := newEnv(t)
		e.director.set(func(d *fakeDirector) { d.conditionErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Connect_Runtime_Agent", t0, registered(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "Director: setting the runtime's status condition: "+errTransient.Error())
		_, started := op.Data.RequestedAt["agent"]
		assert.False(t, started)
	})

	t.Run("a token without connector URL gets the configured one", func(t *testing.T) {
		e := newEnv(t)
		e.director.set(func(d *fakeDirector) { d.token.ConnectorURL = "" })
		_, _, err := step(e).Run(e.ctx, stepOp("Connect_Runtime_Agent", t0, registered(e)), testLog())
		require.NoError(t, err)
		written := e.rt.snapshot().written
		require.Len(t, written, 1)
		assert.Equal(t, "https://default-connector.example/graphql", written[0].ConnectorURL)
	})

	t.Run("the connection wait restarts when the step runs again", func(t *testing.T) {
		e := newEnv(t)
		data := registered(e)
		data.RequestedAt = map[string]time.Time{"agent": t0, "create": t0.Add(-time.Hour)}
		later := t0.Add(2 * time.Hour)
		op, _, err := step(e).Run(e.ctx, stepOp("Connect_Runtime_Agent", later, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, later, op.Data.RequestedAt["agent"])
		assert.Equal(t, t0.Add(-time.Hour), op.Data.RequestedAt["create"], "other request times are kept")
	})

	t.Run("token error: retry, nothing written", func(t *testing.T) {
		e := newEnv(t)
		e.director.set(func(d *fakeDirector) { d.tokenErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Connect_Runtime_Agent", t0, registered(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "requesting a one-time token: "+errTransient.Error())
		assert.Empty(t, e.rt.snapshot().written)
		assert.Empty(t, e.director.snapshot().conditions)
		assert.Empty(t, op.Data.RequestedAt["agent"])
	})

	t.Run("write error: retry, the connection wait has not started", func(t *testing.T) {
		e := newEnv(t)
		e.rt.set(func(r *fakeRuntime) { r.writeErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Connect_Runtime_Agent", t0, registered(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "writing the agent configuration: "+errTransient.Error())
		_, started := op.Data.RequestedAt["agent"]
		assert.False(t, started)
	})

	t.Run("no kubeconfig: retry before asking for a token", func(t *testing.T) {
		e := newEnv(t)
		data := e.runtimeData("rt-1", true, false)
		op, wait, err := step(e).Run(e.ctx, stepOp("Connect_Runtime_Agent", t0, data), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "opening the runtime")
		assert.Empty(t, e.director.snapshot().tokens)
	})
}

func TestWaitForAgentToConnect(t *testing.T) {
	step := func(e *env) operations.WaitForAgentToConnect { return operations.WaitForAgentToConnect{Deps: e.deps} }
	configured := func(e *env) operations.Data {
		data := e.runtimeData("rt-1", true, true)
		data.RequestedAt = map[string]time.Time{"agent": t0}
		return data
	}

	t.Run("Synchronized succeeds; asked with the configuration time", func(t *testing.T) {
		e := newEnv(t)
		e.rt.set(func(r *fakeRuntime) { r.connState = runtimeclient.ConnectionSynchronized })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Agent_To_Connect", t0.Add(time.Minute), configured(e)), testLog())
		require.NoError(t, err)
		assert.Zero(t, wait)
		assert.Empty(t, op.LastError)
		assert.Equal(t, []time.Time{t0}, e.rt.snapshot().connSince)
	})

	t.Run("not synchronized: retry naming the state", func(t *testing.T) {
		for _, state := range []string{"", runtimeclient.ConnectionFailed} {
			e := newEnv(t)
			e.rt.set(func(r *fakeRuntime) { r.connState = state })
			op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Agent_To_Connect", t0, configured(e)), testLog())
			require.NoError(t, err)
			assert.Equal(t, pollInterval, wait)
			assert.Equal(t, fmt.Sprintf("waiting for the Runtime Agent to connect (state %q)", state), op.LastError)
		}
	})

	t.Run("read error: retry", func(t *testing.T) {
		e := newEnv(t)
		e.rt.set(func(r *fakeRuntime) { r.connErr = errTransient })
		op, wait, err := step(e).Run(e.ctx, stepOp("Wait_For_Agent_To_Connect", t0, configured(e)), testLog())
		require.NoError(t, err)
		assert.Equal(t, pollInterval, wait)
		assert.Contains(t, op.LastError, "reading the CompassConnection: "+errTransient.Error())
	})
}

func TestDataRoundTrip(t *testing.T) {
	data := operations.Data{RuntimeID: "rt", Tenant: "t", Backend: "b", Config: testConfig(true), CompassRuntimeID: "c",
		ClusterDomain: "d", RequestedAt: map[string]time.Time{"create": t0}, TargetRevision: 3}
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	var back operations.Data
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, data, back)

	cfgRaw, err := json.Marshal(data.Config)
	require.NoError(t, err)
	cfg, err := operations.DecodeRuntimeConfig(storage.Runtime{ID: "rt", Config: cfgRaw})
	require.NoError(t, err)
	assert.Equal(t, data.Config, cfg)

	empty, err := operations.DecodeRuntimeConfig(storage.Runtime{ID: "rt"})
	require.NoError(t, err)
	assert.Equal(t, operations.RuntimeConfig{}, empty)

	_, err = operations.DecodeRuntimeConfig(storage.Runtime{ID: "rt", Config: []byte(`{"cluster": 1}`)})
	require.ErrorContains(t, err, "decoding configuration of runtime rt")
}
