package operations_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// defaultConfig has the documented default time limits, set explicitly so the tests do not
// depend on the environment.
func defaultConfig() config.Config {
	return config.Config{
		Provisioning: config.ProvisioningTimeouts{
			ClusterCreation: 60 * time.Minute, ClusterDomains: 10 * time.Minute, BindingsCreation: 5 * time.Minute,
			InstallationTriggering: 20 * time.Minute, Installation: 60 * time.Minute, Upgrade: 60 * time.Minute,
			UpgradeTriggering: 20 * time.Minute, ShootUpgrade: 30 * time.Minute, Hibernation: 30 * time.Minute,
			AgentConfiguration: 15 * time.Minute, AgentConnection: 15 * time.Minute,
		},
		Deprovisioning: config.DeprovisioningTimeouts{
			ClusterCleanup: 20 * time.Minute, ClusterDeletion: 30 * time.Minute, WaitingForClusterDeletion: 60 * time.Minute,
		},
		OperationTimeout: 24 * time.Hour,
	}
}

// distinctConfig gives every configured limit its own value, so a stage failing on a limit
// shows which configuration field it was given.
func distinctConfig() config.Config {
	return config.Config{
		Provisioning: config.ProvisioningTimeouts{
			ClusterDomains: 11 * time.Minute, ClusterCreation: 12 * time.Minute, BindingsCreation: 13 * time.Minute,
			InstallationTriggering: 14 * time.Minute, Installation: 15 * time.Minute, AgentConfiguration: 16 * time.Minute,
			AgentConnection: 17 * time.Minute, UpgradeTriggering: 21 * time.Minute, ShootUpgrade: 22 * time.Minute,
			Upgrade: 23 * time.Minute, Hibernation: 24 * time.Minute,
		},
		// ClusterCleanup is below Cleanup_Cluster's own 5m retry time so the stage limit shows.
		Deprovisioning: config.DeprovisioningTimeouts{
			ClusterCleanup: 4 * time.Minute, ClusterDeletion: 18 * time.Minute, WaitingForClusterDeletion: 19 * time.Minute,
		},
		OperationTimeout: 48 * time.Hour,
	}
}

var (
	provisionStages = []string{"WaitingForClusterDomain", "WaitingForClusterCreation", "CreatingBindingsForOperators",
		"StartingInstallation", "WaitingForInstallation", "ConnectRuntimeAgent", "WaitForAgentToConnect"}
	deprovisionStages    = []string{"CleanupCluster", "DeprovisionCluster", "WaitForClusterDeletion"}
	upgradeShootStages   = []string{"WaitingForShootNewVersion", "WaitingForShootUpgrade"}
	upgradeRuntimeStages = []string{"StartingUpgrade", "UpgradingRuntime", "UpdatingUpgradeState"}
	hibernateStages      = []string{"StartingHibernation", "WaitingForHibernation"}
	reconnectStages      = []string{"ConnectRuntimeAgent", "WaitForAgentToConnect"}
)

func TestDefinitions(t *testing.T) {
	e := newEnv(t)
	cfg := defaultConfig()
	defs, err := operations.Definitions(e.deps, cfg)
	require.NoError(t, err)

	want := map[string]map[string][]string{
		operations.TypeProvision: {
			"WaitingForClusterDomain":      {"Register_Runtime", "Create_Cluster", "Wait_For_Cluster_Domain"},
			"WaitingForClusterCreation":    {"Wait_For_Cluster_Creation"},
			"CreatingBindingsForOperators": {"Create_Bindings_For_Operators"},
			"StartingInstallation":         {"Start_Installation"},
			"WaitingForInstallation":       {"Wait_For_Installation"},
			"ConnectRuntimeAgent":          {"Connect_Runtime_Agent"},
			"WaitForAgentToConnect":        {"Wait_For_Agent_To_Connect"},
		},
		operations.TypeDeprovision: {
			"CleanupCluster": {"Cleanup_Cluster"}, "DeprovisionCluster": {"Deprovision_Cluster"},
			"WaitForClusterDeletion": {"Wait_For_Cluster_Deletion"},
		},
		operations.TypeUpgradeShoot: {
			"WaitingForShootNewVersion": {"Upgrade_Shoot"}, "WaitingForShootUpgrade": {"Wait_For_Shoot_Upgrade"},
		},
		operations.TypeUpgradeRuntime: {
			"StartingUpgrade": {"Start_Upgrade"}, "UpgradingRuntime": {"Wait_For_Upgrade"},
			"UpdatingUpgradeState": {"Update_Upgrade_State"},
		},
		operations.TypeHibernate: {
			"StartingHibernation": {"Hibernate_Cluster"}, "WaitingForHibernation": {"Wait_For_Hibernation"},
		},
		operations.TypeReconnect: {
			"ConnectRuntimeAgent": {"Connect_Runtime_Agent"}, "WaitForAgentToConnect": {"Wait_For_Agent_To_Connect"},
		},
	}
	got := map[string]map[string][]string{}
	for _, d := range defs {
		assert.Equal(t, cfg.OperationTimeout, d.Timeout(), d.Type())
		p, ok := d.(*engine.Process[operations.Data])
		require.True(t, ok, "%s is a process of operations.Data", d.Type())
		got[d.Type()] = p.Stages()
	}
	assert.Equal(t, want, got)

	t.Run("an invalid operation timeout is an error", func(t *testing.T) {
		bad := defaultConfig()
		bad.OperationTimeout = 0
		_, err := operations.Definitions(e.deps, bad)
		require.ErrorContains(t, err, "defining provisioner process provisioner_provision")
	})
}

// engineEnv runs the provisioner's processes on a real engine with a controllable clock.
type engineEnv struct {
	*env
	clock  *testClock
	eng    *engine.Engine
	faulty *faultyRuntimes
	cfg    config.Config
}

func newEngineEnv(t *testing.T, cfg config.Config) *engineEnv {
	t.Helper()
	e := newEnv(t)
	// Engine tests step through time a minute at a time.
	e.deps.PollInterval = time.Minute
	faulty := &faultyRuntimes{Runtimes: e.store.Runtimes()}
	e.deps.Runtimes = faulty
	// Everything succeeds at once unless a test says otherwise.
	e.backend.set(func(b *fakeBackend) {
		b.status = infrastructure.Status{Domain: "c-test.kyma.example", Phase: infrastructure.PhaseSucceeded, Hibernated: true}
		b.deleted = true
	})
	e.rt.set(func(r *fakeRuntime) {
		r.kymaState, r.connState = runtimeclient.KymaReady, runtimeclient.ConnectionSynchronized
	})

	clock := &testClock{t: t0}
	defs, err := operations.Definitions(e.deps, cfg)
	require.NoError(t, err)
	eng, err := engine.New(e.store, engine.Config{Workers: 1, Owner: "test-engine"}, testLog(), engine.WithClock(clock))
	require.NoError(t, err)
	for _, d := range defs {
		require.NoError(t, eng.Register(d))
	}
	return &engineEnv{env: e, clock: clock, eng: eng, faulty: faulty, cfg: cfg}
}

// provision inserts a runtime with its provision operation, due now.
func (e *engineEnv) provision(id string, cfg operations.RuntimeConfig) string {
	e.t.Helper()
	data := operations.Data{RuntimeID: id, Tenant: tenant, Backend: backendName, Config: cfg}
	op, err := engine.NewOperation(operations.TypeProvision, id, data, e.cfg.OperationTimeout, e.clock.Now())
	require.NoError(e.t, err)
	raw, err := json.Marshal(cfg)
	require.NoError(e.t, err)
	_, op, err = e.store.Runtimes().InsertRuntimeWithOperation(e.ctx,
		storage.Runtime{ID: id, Tenant: tenant, Name: "my-runtime", Backend: backendName, Config: raw}, op)
	require.NoError(e.t, err)
	return op.ID
}

// pollOnTimeUntil runs the operation at each of its due times up to until (the engine on time:
// a run late past its due time does not count against its limits), then sets the clock to until
// and runs what is due; it returns the operation then.
func (e *engineEnv) pollOnTimeUntil(id string, until time.Time) storage.Operation {
	e.t.Helper()
	for {
		op, err := e.store.Operations().GetOperation(e.ctx, id)
		require.NoError(e.t, err)
		if !op.State.Active() || op.DueAt == nil || op.DueAt.After(until) {
			break
		}
		e.clock.Set(*op.DueAt)
		_, err = e.eng.RunDue(e.ctx)
		require.NoError(e.t, err)
	}
	if e.clock.Now().Before(until) {
		e.clock.Set(until)
	}
	_, err := e.eng.RunDue(e.ctx)
	require.NoError(e.t, err)
	op, err := e.store.Operations().GetOperation(e.ctx, id)
	require.NoError(e.t, err)
	return op
}

// provisioned stores a ready runtime (kubeconfig, Compass ID, finished provisioning).
func (e *engineEnv) provisioned(id string, cfg operations.RuntimeConfig) {
	e.t.Helper()
	opID := e.provision(id, cfg)
	op, err := e.store.Operations().GetOperation(e.ctx, opID)
	require.NoError(e.t, err)
	op.State, op.DueAt = storage.StateSucceeded, nil
	_, err = e.store.Operations().UpdateOperation(e.ctx, op)
	require.NoError(e.t, err)
	rt := e.runtime(id)
	rt.CompassRuntimeID = "compass-1"
	rt.Secrets = storage.Secrets{operations.KubeconfigKey: kubeconfig}
	_, err = e.store.Runtimes().UpdateRuntime(e.ctx, rt)
	require.NoError(e.t, err)
}

// start begins an operation of opType on a provisioned runtime, as the service does.
func (e *engineEnv) start(opType, id string, cfg operations.RuntimeConfig) string {
	e.t.Helper()
	data := operations.Data{RuntimeID: id, Tenant: tenant, Backend: backendName, Config: cfg, CompassRuntimeID: "compass-1"}
	op, err := engine.NewOperation(opType, id, data, e.cfg.OperationTimeout, e.clock.Now())
	require.NoError(e.t, err)
	op, err = e.store.Runtimes().StartRuntimeOperation(e.ctx, op)
	require.NoError(e.t, err)
	return op.ID
}

// drive runs the operation, moving the clock to each next due time, until it finishes.
func (e *engineEnv) drive(opID string) storage.Operation {
	e.t.Helper()
	for i := 0; i < 1000; i++ {
		_, err := e.eng.RunDue(e.ctx)
		require.NoError(e.t, err)
		op, err := e.store.Operations().GetOperation(e.ctx, opID)
		require.NoError(e.t, err)
		if !op.State.Active() {
			return op
		}
		require.NotNil(e.t, op.DueAt, "an active operation is due some time")
		require.True(e.t, op.DueAt.After(e.clock.Now()), "RunDue left a due operation behind")
		e.clock.Set(*op.DueAt)
	}
	e.t.Fatal("operation did not finish")
	return storage.Operation{}
}

func (e *engineEnv) events(opID string) []storage.Event {
	e.t.Helper()
	page, err := e.store.Events().ListEvents(e.ctx, storage.EventFilter{OperationIDs: []string{opID}, Paging: storage.Paging{PageSize: 1000}})
	require.NoError(e.t, err)
	return page.Items
}

// stepsWith lists the steps of events of type typ, in order, without repeats.
func stepsWith(events []storage.Event, typ storage.EventType) []string {
	var out []string
	for _, ev := range events {
		if ev.Type == typ && (len(out) == 0 || out[len(out)-1] != ev.Step) {
			out = append(out, ev.Step)
		}
	}
	return out
}

func decodeData(t *testing.T, op storage.Operation) operations.Data {
	t.Helper()
	var d operations.Data
	require.NoError(t, json.Unmarshal(op.Data, &d))
	return d
}

func TestProvisionTimesOutWaitingForTheClusterDomain(t *testing.T) {
	e := newEngineEnv(t, defaultConfig())
	e.backend.set(func(b *fakeBackend) { b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress} })
	id := e.provision("rt-1", testConfig(true))

	// Within the limit the operation keeps waiting, polled on time (a jump of the clock past
	// its due time would be the engine's delay, which limits do not count).
	start := e.clock.Now()
	_, err := e.eng.RunDue(e.ctx)
	require.NoError(t, err)
	op := e.pollOnTimeUntil(id, start.Add(9*time.Minute))
	assert.Equal(t, storage.StateInProgress, op.State)
	assert.Equal(t, "waiting for the cluster's domain", op.LastError)
	assert.Equal(t, "WaitingForClusterDomain", op.Stage)

	// Past ClusterDomains it fails.
	op = e.pollOnTimeUntil(id, start.Add(11*time.Minute))
	assert.Equal(t, storage.StateFailed, op.State)
	assert.Equal(t, "step Wait_For_Cluster_Domain: stage WaitingForClusterDomain exceeded its time limit of 10m0s", op.LastError)
	assert.Equal(t, "WaitingForClusterDomain", op.Stage)

	data := decodeData(t, op)
	assert.Equal(t, "compass-1", data.CompassRuntimeID)
	assert.Equal(t, t0, data.RequestedAt["create"], "the create request time is kept across reruns")
	for _, s := range e.backend.Calls("Status") {
		assert.Equal(t, t0, s.RequestedAt)
	}
	assert.Len(t, e.backend.Calls("Create"), 1, "Create_Cluster ran once")
	assert.Len(t, e.director.snapshot().registered, 1, "Register_Runtime ran once")
	assert.Empty(t, e.director.snapshot().labelled)
}

func TestProvisionWithoutKymaSkipsTheInstallation(t *testing.T) {
	e := newEngineEnv(t, defaultConfig())
	id := e.provision("rt-1", testConfig(false))
	op := e.drive(id)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, provisionStages, op.Progress.FinishedStages)

	events := e.events(id)
	assert.Equal(t, []string{"Start_Installation", "Wait_For_Installation"}, stepsWith(events, storage.EventSkipped))
	for _, ev := range events {
		if ev.Type == storage.EventSkipped {
			assert.Equal(t, "condition not met", ev.Message)
		}
	}
	assert.Equal(t, []string{"Register_Runtime", "Create_Cluster", "Wait_For_Cluster_Domain", "Wait_For_Cluster_Creation",
		"Create_Bindings_For_Operators", "Connect_Runtime_Agent", "Wait_For_Agent_To_Connect"}, stepsWith(events, storage.EventSucceeded))
	assert.True(t, op.Progress.Steps["Start_Installation"].Skipped)
	snap := e.rt.snapshot()
	assert.Empty(t, snap.applied)
	assert.Empty(t, snap.kymaSince)
	assert.Len(t, snap.written, 1)
}

func TestProvisionWithKymaRunsEveryStageInOrder(t *testing.T) {
	e := newEngineEnv(t, defaultConfig())
	// Everything takes a few polls.
	e.backend.set(func(b *fakeBackend) { b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress} })
	e.rt.set(func(r *fakeRuntime) { r.kymaState, r.connState = runtimeclient.KymaProcessing, "" })
	id := e.provision("rt-1", testConfig(true))
	_, err := e.eng.RunDue(e.ctx)
	require.NoError(t, err)
	e.clock.Advance(2 * time.Minute)
	e.backend.set(func(b *fakeBackend) {
		b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress, Domain: "d.example"}
	})
	_, err = e.eng.RunDue(e.ctx)
	require.NoError(t, err)
	e.clock.Advance(5 * time.Minute)
	e.backend.set(func(b *fakeBackend) {
		b.status = infrastructure.Status{Phase: infrastructure.PhaseSucceeded, Domain: "d.example"}
	})
	_, err = e.eng.RunDue(e.ctx)
	require.NoError(t, err)
	e.clock.Advance(10 * time.Minute)
	e.rt.set(func(r *fakeRuntime) { r.kymaState = runtimeclient.KymaReady })
	_, err = e.eng.RunDue(e.ctx)
	require.NoError(t, err)
	e.clock.Advance(time.Minute)
	e.rt.set(func(r *fakeRuntime) { r.connState = runtimeclient.ConnectionSynchronized })

	op := e.drive(id)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, provisionStages, op.Progress.FinishedStages)
	assert.Equal(t, []string{"Register_Runtime", "Create_Cluster", "Wait_For_Cluster_Domain", "Wait_For_Cluster_Creation",
		"Create_Bindings_For_Operators", "Start_Installation", "Wait_For_Installation", "Connect_Runtime_Agent",
		"Wait_For_Agent_To_Connect"}, stepsWith(e.events(id), storage.EventSucceeded))
	assert.Empty(t, stepsWith(e.events(id), storage.EventSkipped))

	rt := e.runtime("rt-1")
	assert.Equal(t, "compass-1", rt.CompassRuntimeID)
	assert.Equal(t, kubeconfig, rt.Secrets[operations.KubeconfigKey])
	assert.Equal(t, "PROVISIONING", e.director.snapshot().registered[0].Condition, "registered provisioning")
	assert.Equal(t, []conditionCall{{tenant, "compass-1", "CONNECTED"}},
		e.director.snapshot().conditions, "the Director sees the runtime provisioning, then connected")
	data := decodeData(t, op)
	assert.Equal(t, "d.example", data.ClusterDomain)
	assert.Equal(t, t0, data.RequestedAt["create"])
	assert.Equal(t, t0.Add(7*time.Minute), data.RequestedAt["install"], "Kyma was applied once the cluster was ready")
	assert.Equal(t, t0.Add(17*time.Minute), data.RequestedAt["agent"])
	snap := e.rt.snapshot()
	for _, since := range snap.kymaSince {
		assert.Equal(t, t0.Add(7*time.Minute), since)
	}
	for _, since := range snap.connSince {
		assert.Equal(t, t0.Add(17*time.Minute), since)
	}
}

// The steps that open the cluster find its kubeconfig in the run's memo: Wait_For_Cluster_Creation
// stored it in this run, or the first of them read it. A run after a wait reads it again.
func TestProvisionReadsTheKubeconfigOnceARun(t *testing.T) {
	t.Run("one run", func(t *testing.T) {
		e := newEngineEnv(t, defaultConfig())
		op := e.drive(e.provision("rt-1", testConfig(true)))
		require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
		// Wait_For_Cluster_Creation's kubeconfig rode on the operation's save (no read-modify-write
		// of the runtime); five steps opened the cluster after it without a read.
		assert.Equal(t, 0, e.faulty.readCount())
		rt, err := e.store.Runtimes().GetRuntime(e.ctx, "rt-1")
		require.NoError(t, err)
		assert.NotEmpty(t, rt.Secrets[operations.KubeconfigKey], "the kubeconfig is stored with the runtime")
	})
	t.Run("a wait between", func(t *testing.T) {
		e := newEngineEnv(t, defaultConfig())
		e.rt.set(func(r *fakeRuntime) { r.kymaState = runtimeclient.KymaProcessing })
		id := e.provision("rt-1", testConfig(true))
		_, err := e.eng.RunDue(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, e.faulty.readCount(), "Create_Bindings_For_Operators and Start_Installation used the kubeconfig of the memo")
		e.clock.Advance(time.Minute)
		e.rt.set(func(r *fakeRuntime) { r.kymaState = runtimeclient.KymaReady })
		op := e.drive(id)
		require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
		assert.Equal(t, 1, e.faulty.readCount(), "the run after the wait read the stored kubeconfig once for its three steps")
	})
}

func TestProvisionFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(e *engineEnv)
		stage string
		err   string
	}{
		"backend reports Failed": {
			setup: func(e *engineEnv) {
				e.backend.set(func(b *fakeBackend) {
					b.status = infrastructure.Status{Phase: infrastructure.PhaseFailed, Reason: "quota exceeded"}
				})
			},
			stage: "WaitingForClusterDomain", err: "cluster creation failed: quota exceeded",
		},
		"no capacity": {
			setup: func(e *engineEnv) {
				e.backend.set(func(b *fakeBackend) { b.createErr = fmt.Errorf("pool full: %w", infrastructure.ErrNoCapacity) })
			},
			stage: "WaitingForClusterDomain", err: "creating cluster: pool full: no capacity left",
		},
		"cluster creation Failed after the domain": {
			setup: func(e *engineEnv) {
				e.backend.set(func(b *fakeBackend) {
					b.status = infrastructure.Status{Domain: "d", Phase: infrastructure.PhaseInProgress}
				})
				e.director.set(func(d *fakeDirector) { d.labelsErr = nil })
			},
			stage: "WaitingForClusterCreation", err: "cluster creation failed: nodes not ready",
		},
		"Kyma Error": {
			setup: func(e *engineEnv) {
				e.rt.set(func(r *fakeRuntime) { r.kymaState, r.kymaMsg = runtimeclient.KymaError, "module serverless failed" })
			},
			stage: "WaitingForInstallation", err: "kyma installation failed: module serverless failed",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEngineEnv(t, defaultConfig())
			tc.setup(e)
			id := e.provision("rt-1", testConfig(true))
			if tc.stage == "WaitingForClusterCreation" {
				_, err := e.eng.RunDue(e.ctx)
				require.NoError(t, err)
				e.clock.Advance(time.Minute)
				e.backend.set(func(b *fakeBackend) {
					b.status = infrastructure.Status{Domain: "d", Phase: infrastructure.PhaseFailed, Reason: "nodes not ready"}
				})
			}
			op := e.drive(id)
			assert.Equal(t, storage.StateFailed, op.State)
			assert.Equal(t, tc.err, op.LastError)
			assert.Equal(t, tc.stage, op.Stage)
			if tc.stage != "WaitingForInstallation" {
				assert.Empty(t, e.runtime("rt-1").Secrets[operations.KubeconfigKey], "no kubeconfig from a failed cluster")
			}
			evs := e.events(id)
			require.NotEmpty(t, evs)
			last := evs[len(evs)-1]
			assert.Equal(t, storage.EventFailed, last.Type)
			assert.Equal(t, tc.err, last.Message)
		})
	}
}

func TestProcessesRunTheirStagesInOrder(t *testing.T) {
	upgraded := testConfig(true)
	upgraded.Kyma.Version = "2.21.0"
	resized := testConfig(true)
	resized.Cluster.MachineType, resized.Cluster.AutoScalerMax = "n2-standard-8", 6
	for _, tc := range []struct {
		opType string
		cfg    operations.RuntimeConfig
		stages []string
		check  func(t *testing.T, e *engineEnv, op storage.Operation)
	}{
		{operations.TypeDeprovision, testConfig(true), deprovisionStages, func(t *testing.T, e *engineEnv, op storage.Operation) {
			rt := e.runtime("rt-1")
			assert.True(t, rt.Deleted)
			assert.Empty(t, rt.Secrets[operations.KubeconfigKey])
			assert.Equal(t, 1, e.rt.snapshot().deleteCalls)
			assert.Equal(t, []string{"compass-1"}, e.director.snapshot().unregistered)
		}},
		{operations.TypeUpgradeShoot, resized, upgradeShootStages, func(t *testing.T, e *engineEnv, op storage.Operation) {
			assert.Equal(t, int64(3), decodeData(t, op).TargetRevision)
			assert.Equal(t, resized, e.storedConfig("rt-1"))
			assert.Equal(t, resized.Cluster, e.backend.Calls("Update")[0].Cluster)
		}},
		{operations.TypeUpgradeRuntime, upgraded, upgradeRuntimeStages, func(t *testing.T, e *engineEnv, op storage.Operation) {
			assert.Equal(t, "2.21.0", e.storedConfig("rt-1").Kyma.Version)
			assert.Equal(t, "2.21.0", e.rt.snapshot().applied[0].Version)
		}},
		{operations.TypeHibernate, testConfig(true), hibernateStages, func(t *testing.T, e *engineEnv, op storage.Operation) {
			assert.Len(t, e.backend.Calls("Hibernate"), 1)
		}},
		{operations.TypeReconnect, testConfig(true), reconnectStages, func(t *testing.T, e *engineEnv, op storage.Operation) {
			assert.Equal(t, []string{"compass-1"}, e.director.snapshot().tokens)
			assert.Len(t, e.rt.snapshot().written, 1)
		}},
	} {
		t.Run(tc.opType, func(t *testing.T) {
			e := newEngineEnv(t, defaultConfig())
			e.backend.set(func(b *fakeBackend) { b.updateRev, b.status.ObservedRevision = 3, 3 })
			e.provisioned("rt-1", testConfig(true))
			id := e.start(tc.opType, "rt-1", tc.cfg)
			op := e.drive(id)
			require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
			assert.Equal(t, tc.stages, op.Progress.FinishedStages)
			tc.check(t, e, op)
		})
	}
}

func TestStageTimeLimitsComeFromTheConfig(t *testing.T) {
	cfg := distinctConfig()
	p, d := cfg.Provisioning, cfg.Deprovisioning
	type blocker func(e *engineEnv)
	inProgress := func(domain string) blocker {
		return func(e *engineEnv) {
			e.backend.set(func(b *fakeBackend) {
				b.status = infrastructure.Status{Phase: infrastructure.PhaseInProgress, Domain: domain}
			})
		}
	}
	bindingsFail := func(e *engineEnv) { e.rt.set(func(r *fakeRuntime) { r.bindingsErr = errTransient }) }
	applyFails := func(e *engineEnv) { e.rt.set(func(r *fakeRuntime) { r.applyErr = errTransient }) }
	kymaProcessing := func(e *engineEnv) { e.rt.set(func(r *fakeRuntime) { r.kymaState = runtimeclient.KymaProcessing }) }
	writeFails := func(e *engineEnv) { e.rt.set(func(r *fakeRuntime) { r.writeErr = errTransient }) }
	notConnected := func(e *engineEnv) { e.rt.set(func(r *fakeRuntime) { r.connState = "" }) }

	for _, tc := range []struct {
		opType string
		stages []string
		stage  string
		limit  time.Duration
		block  blocker
	}{
		{operations.TypeProvision, provisionStages, "WaitingForClusterDomain", p.ClusterDomains, inProgress("")},
		{operations.TypeProvision, provisionStages, "WaitingForClusterCreation", p.ClusterCreation, inProgress("d.example")},
		{operations.TypeProvision, provisionStages, "CreatingBindingsForOperators", p.BindingsCreation, bindingsFail},
		{operations.TypeProvision, provisionStages, "StartingInstallation", p.InstallationTriggering, applyFails},
		{operations.TypeProvision, provisionStages, "WaitingForInstallation", p.Installation, kymaProcessing},
		{operations.TypeProvision, provisionStages, "ConnectRuntimeAgent", p.AgentConfiguration, writeFails},
		{operations.TypeProvision, provisionStages, "WaitForAgentToConnect", p.AgentConnection, notConnected},
		// CleanupCluster never reaches its limit: it gives up inside it without failing (see
		// cleanupRetryTime and the test that deprovisioning carries on).
		{operations.TypeDeprovision, deprovisionStages, "DeprovisionCluster", d.ClusterDeletion, func(e *engineEnv) {
			e.backend.set(func(b *fakeBackend) { b.deleteErr = errTransient })
		}},
		{operations.TypeDeprovision, deprovisionStages, "WaitForClusterDeletion", d.WaitingForClusterDeletion, func(e *engineEnv) {
			e.backend.set(func(b *fakeBackend) { b.deleted = false })
		}},
		{operations.TypeUpgradeShoot, upgradeShootStages, "WaitingForShootNewVersion", p.UpgradeTriggering, func(e *engineEnv) {
			e.backend.set(func(b *fakeBackend) { b.updateErr = errTransient })
		}},
		{operations.TypeUpgradeShoot, upgradeShootStages, "WaitingForShootUpgrade", p.ShootUpgrade, inProgress("d.example")},
		{operations.TypeUpgradeRuntime, upgradeRuntimeStages, "StartingUpgrade", p.UpgradeTriggering, applyFails},
		{operations.TypeUpgradeRuntime, upgradeRuntimeStages, "UpgradingRuntime", p.Upgrade, kymaProcessing},
		{operations.TypeUpgradeRuntime, upgradeRuntimeStages, "UpdatingUpgradeState", p.UpgradeTriggering, func(e *engineEnv) {
			e.faulty.mu.Lock()
			e.faulty.updateErr, e.faulty.failUpdates = errTransient, -1
			e.faulty.mu.Unlock()
		}},
		{operations.TypeHibernate, hibernateStages, "StartingHibernation", p.UpgradeTriggering, func(e *engineEnv) {
			e.backend.set(func(b *fakeBackend) { b.hibernateErr = errTransient })
		}},
		{operations.TypeHibernate, hibernateStages, "WaitingForHibernation", p.Hibernation, func(e *engineEnv) {
			e.backend.set(func(b *fakeBackend) { b.status.Hibernated = false })
		}},
		{operations.TypeReconnect, reconnectStages, "ConnectRuntimeAgent", p.AgentConfiguration, writeFails},
		{operations.TypeReconnect, reconnectStages, "WaitForAgentToConnect", p.AgentConnection, notConnected},
	} {
		t.Run(tc.opType+"/"+tc.stage, func(t *testing.T) {
			e := newEngineEnv(t, cfg)
			var id string
			if tc.opType == operations.TypeProvision {
				id = e.provision("rt-1", testConfig(true))
			} else {
				e.provisioned("rt-1", testConfig(true))
				id = e.start(tc.opType, "rt-1", testConfig(true))
			}
			tc.block(e)
			op := e.drive(id)
			require.Equal(t, storage.StateFailed, op.State)
			assert.Regexp(t, fmt.Sprintf(`^step \w+: stage %s exceeded its time limit of %s$`, tc.stage, tc.limit), op.LastError)
			assert.Equal(t, tc.stage, op.Stage)
			assert.Equal(t, tc.limit, e.clock.Now().Sub(op.Progress.StageStartedAt[tc.stage]), "failed exactly at the limit")
			i := indexOf(tc.stages, tc.stage)
			require.GreaterOrEqual(t, i, 0)
			if i == 0 {
				assert.Empty(t, op.Progress.FinishedStages)
			} else {
				assert.Equal(t, tc.stages[:i], op.Progress.FinishedStages, "the stages before it finished, in order")
			}
		})
	}
}

func TestCleanupGivesUpAndDeprovisioningGoesOn(t *testing.T) {
	e := newEngineEnv(t, defaultConfig())
	e.rt.set(func(r *fakeRuntime) { r.deleteErr = errTransient })
	e.provisioned("rt-1", testConfig(true))
	id := e.start(operations.TypeDeprovision, "rt-1", testConfig(true))
	op := e.drive(id)
	require.Equal(t, storage.StateSucceeded, op.State, op.LastError)
	assert.Equal(t, []string{"Cleanup_Cluster"}, op.Progress.ExecutedButNotCompleted)
	assert.Equal(t, deprovisionStages, op.Progress.FinishedStages)
	assert.Equal(t, t0.Add(5*time.Minute), op.Progress.StageStartedAt["DeprovisionCluster"], "gave up after the 5m retry time")
	assert.True(t, e.runtime("rt-1").Deleted)

	var msgs []string
	for _, ev := range e.events(id) {
		if ev.Step == "Cleanup_Cluster" && ev.Type == storage.EventSucceeded {
			msgs = append(msgs, ev.Message)
		}
	}
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], "executed but not completed: deleting Kyma from the runtime")
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// Stage names must stay those of the Compass provisioner; the constants are what callers use.
func TestStageNameConstants(t *testing.T) {
	got := []string{
		operations.StageWaitingForClusterDomain, operations.StageWaitingForClusterCreation, operations.StageCreatingBindingsForOperators,
		operations.StageStartingInstallation, operations.StageWaitingForInstallation, operations.StageConnectRuntimeAgent,
		operations.StageWaitForAgentToConnect, operations.StageCleanupCluster, operations.StageDeprovisionCluster,
		operations.StageWaitForClusterDeletion, operations.StageWaitingForShootNewVersion, operations.StageWaitingForShootUpgrade,
	}
	want := append(append(append([]string(nil), provisionStages...), deprovisionStages...), upgradeShootStages...)
	assert.Equal(t, want, got)
	sorted := append([]string(nil), got...)
	sort.Strings(sorted)
	for i := 1; i < len(sorted); i++ {
		assert.NotEqual(t, sorted[i-1], sorted[i])
	}
}
