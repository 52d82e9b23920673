package service

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/simulated"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

const testTenant = "tenant-a"

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// testEnv is the service on a real SQLite store and a real backend set of one simulated entry.
type testEnv struct {
	t     *testing.T
	ctx   context.Context
	store storage.Store
	svc   *Service

	mu  sync.Mutex
	now time.Time
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	log := logrus.New()
	if !testing.Verbose() {
		log.SetOutput(io.Discard)
	}
	ctx := context.Background()
	store, err := driver.Open(ctx, driver.Config{Driver: driver.SQLite, Path: filepath.Join(t.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	backends, err := infrastructure.NewSet(ctx, infrastructure.Config{SetJSON: `{"simulated":{"type":"simulated","spec":{}}}`},
		infrastructure.Deps{Static: store.StaticAllocations()}, infrastructure.Types{"simulated": simulated.Factory})
	require.NoError(t, err)
	e := &testEnv{t: t, ctx: ctx, store: store, svc: New(store, backends, time.Hour, log), now: t0}
	// Operations get distinct, increasing creation times so "newest first" is well defined.
	e.svc.now = func() time.Time {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.now = e.now.Add(time.Second)
		return e.now
	}
	return e
}

func ptr[T any](v T) *T { return &v }

func validGardener() *gqlschema.GardenerConfigInput {
	return &gqlschema.GardenerConfigInput{
		KubernetesVersion: "1.31", Provider: "gcp", TargetSecret: "gcp-secret", Region: "europe-west3",
		MachineType: "n2-standard-4", WorkerCidr: "10.250.0.0/16", AutoScalerMin: 1, AutoScalerMax: 3, MaxSurge: 1,
		MaxUnavailable: 0, DiskType: ptr("pd-ssd"), VolumeSizeGb: ptr(50), Purpose: ptr("evaluation"),
		ProviderSpecificConfig: &gqlschema.ProviderSpecificInput{GCPConfig: &gqlschema.GCPProviderConfigInput{Zones: []string{"europe-west3-a"}}},
	}
}

func validKyma() *gqlschema.KymaConfigInput {
	return &gqlschema.KymaConfigInput{
		Version: "2.20.0", Profile: ptr(gqlschema.KymaProfileEvaluation),
		Components: []*gqlschema.ComponentConfigurationInput{
			{Component: "istio", Namespace: "istio-system", Configuration: []*gqlschema.ConfigEntryInput{
				{Key: "gateway.replicas", Value: "2"},
				{Key: "certificate.key", Value: "istio-private-key", Secret: ptr(true)},
			}},
			{Component: "serverless", Namespace: "kyma-system", SourceURL: ptr("https://example.com/serverless.yaml")},
		},
		Configuration: []*gqlschema.ConfigEntryInput{
			{Key: "global.domain", Value: "example.com", Secret: ptr(false)},
			{Key: "global.password", Value: "hunter2", Secret: ptr(true)},
		},
	}
}

func validInput() gqlschema.ProvisionRuntimeInput {
	return gqlschema.ProvisionRuntimeInput{
		RuntimeInput:  &gqlschema.RuntimeInput{Name: "my-runtime", Description: ptr("test"), Labels: gqlschema.Labels{"subaccount": "sub-1"}},
		ClusterConfig: &gqlschema.ClusterConfigInput{GardenerConfig: validGardener(), Administrators: []string{"admin@example.com"}},
		KymaConfig:    validKyma(),
	}
}

// provision provisions a runtime and finishes its operation (as if the engine had).
func (e *testEnv) provision(in gqlschema.ProvisionRuntimeInput) string {
	e.t.Helper()
	st, err := e.svc.ProvisionRuntime(e.ctx, testTenant, in)
	require.NoError(e.t, err)
	e.finish(*st.ID, storage.StateSucceeded, nil)
	return *st.RuntimeID
}

// finish ends an operation in state, letting change adjust it first.
func (e *testEnv) finish(opID string, state storage.OperationState, change func(op *storage.Operation)) {
	e.t.Helper()
	op, err := e.store.Operations().GetOperation(e.ctx, opID)
	require.NoError(e.t, err)
	op.State, op.DueAt = state, nil
	if change != nil {
		change(&op)
	}
	_, err = e.store.Operations().UpdateOperation(e.ctx, op)
	require.NoError(e.t, err)
}

func (e *testEnv) runtime(id string) storage.Runtime {
	e.t.Helper()
	rt, err := e.store.Runtimes().GetRuntime(e.ctx, id)
	require.NoError(e.t, err)
	return rt
}
