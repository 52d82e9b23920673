// Package statusbench measures the provisioner's status read, what the broker's waits poll
// (Service.RuntimeOperationStatus), on both drivers, beside its reference in the same run: the
// read it replaced (the whole operation and runtime, the operation's data decoded). Run it with
//
//	bash scripts/with-postgres.sh go test ./internal/provisioner/statusbench -run '^$' -bench . -benchtime 2s
//
// Besides ns/op (wall time, the database's own work included) it prints cpu-µs/op: the test
// process's CPU per read (the broker's share; SQLite runs inside it, PostgreSQL does not).
package statusbench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/simulated"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/service"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// TestMain starts PostgreSQL (when KEB_TEST_DATABASE_URL names none) only for a benchmark run:
// the package has nothing else to run.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	pgtest.Main(m)
}

const (
	tenant   = "tenant-a"
	runtimes = 500
)

func ptr[T any](v T) *T { return &v }

// input is a provisioning as the broker asks for it: a Gardener cluster, Kyma with components
// and configuration, labels.
func input(i int) gqlschema.ProvisionRuntimeInput {
	return gqlschema.ProvisionRuntimeInput{
		RuntimeInput: &gqlschema.RuntimeInput{Name: fmt.Sprintf("runtime-%d", i), Description: ptr("bench"), Labels: gqlschema.Labels{
			"subaccount": fmt.Sprintf("sub-%d", i), "globalaccount": "ga", "broker_instance_id": fmt.Sprintf("instance-%d", i), "broker_plan_id": "aws",
		}},
		ClusterConfig: &gqlschema.ClusterConfigInput{Administrators: []string{"admin@example.com"}, GardenerConfig: &gqlschema.GardenerConfigInput{
			KubernetesVersion: "1.31", Provider: "aws", TargetSecret: "aws-secret", Region: "eu-central-1",
			MachineType: "m6i.large", WorkerCidr: "10.250.0.0/16", AutoScalerMin: 3, AutoScalerMax: 20, MaxSurge: 3,
			DiskType: ptr("gp3"), VolumeSizeGb: ptr(80), Purpose: ptr("production"),
			ProviderSpecificConfig: &gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{
				VpcCidr: "10.250.0.0/16", AWSZones: []*gqlschema.AWSZoneInput{{Name: "eu-central-1a", WorkerCidr: "10.250.0.0/19", PublicCidr: "10.250.32.0/20", InternalCidr: "10.250.48.0/20"}},
			}},
		}},
		KymaConfig: &gqlschema.KymaConfigInput{Version: "2.20.0", Profile: ptr(gqlschema.KymaProfileProduction),
			Components: []*gqlschema.ComponentConfigurationInput{
				{Component: "istio", Namespace: "istio-system", Configuration: []*gqlschema.ConfigEntryInput{{Key: "gateway.replicas", Value: "2"}}},
				{Component: "serverless", Namespace: "kyma-system"}, {Component: "eventing", Namespace: "kyma-system"},
				{Component: "api-gateway", Namespace: "kyma-system"}, {Component: "btp-operator", Namespace: "kyma-system"},
			},
			Configuration: []*gqlschema.ConfigEntryInput{{Key: "global.domain", Value: "example.com"}, {Key: "global.password", Value: "hunter2", Secret: ptr(true)}},
		},
	}
}

// seed provisions runtimes whose operations wait on their clusters with a stored kubeconfig and
// Compass ID, as the broker's waits find them; it returns the operation IDs.
func seed(b *testing.B, store storage.Store, svc *service.Service) []string {
	ctx := context.Background()
	kubeconfig := strings.Repeat("k", 2048)
	ids := make([]string, 0, runtimes)
	for i := 0; i < runtimes; i++ {
		st, err := svc.ProvisionRuntime(ctx, tenant, input(i))
		require.NoError(b, err)
		_, err = storage.ModifyRuntime(ctx, store.Runtimes(), *st.RuntimeID, func(rt *storage.Runtime) error {
			rt.CompassRuntimeID, rt.Secrets[operations.KubeconfigKey] = "compass-"+rt.ID, kubeconfig
			return nil
		})
		require.NoError(b, err)
		op, err := store.Operations().GetOperation(ctx, *st.ID)
		require.NoError(b, err)
		op.State, op.Stage, op.Description = storage.StateInProgress, operations.StageWaitingForClusterCreation, "waiting for the cluster to be created"
		if op.Progress.Steps == nil {
			op.Progress.Steps = map[string]storage.StepProgress{}
		}
		for _, step := range []string{"Register_Runtime", "Create_Cluster", "Wait_For_Cluster_Domain"} {
			op.Progress.Steps[step] = storage.StepProgress{Done: true, Attempts: 1}
		}
		_, err = store.Operations().UpdateOperation(ctx, op)
		require.NoError(b, err)
		ids = append(ids, op.ID)
	}
	return ids
}

func open(b *testing.B, drv string) storage.Store {
	cfg := driver.Config{Driver: driver.SQLite, Path: filepath.Join(b.TempDir(), "keb.db"), SecretKey: strings.Repeat("k", 32)}
	if drv == driver.Postgres {
		cfg = driver.Config{Driver: driver.Postgres, URL: pgtest.NewDatabase(b), SecretKey: strings.Repeat("k", 32)}
	}
	store, err := driver.Open(context.Background(), cfg, quiet())
	require.NoError(b, err)
	b.Cleanup(func() { _ = store.Close() })
	return store
}

func quiet() logrus.FieldLogger {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return log
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fullRead is the reference: what the status read did before it read only the reported columns.
func fullRead(ctx context.Context, store storage.Store, opID string) error {
	op, err := store.Operations().GetOperation(ctx, opID)
	if err != nil {
		return err
	}
	rt, err := store.Runtimes().GetRuntime(ctx, op.InstanceID)
	if err != nil {
		return err
	}
	if rt.Tenant != tenant {
		return fmt.Errorf("runtime %s of tenant %s", rt.ID, rt.Tenant)
	}
	var data operations.Data
	return json.Unmarshal(op.Data, &data)
}

func BenchmarkRuntimeOperationStatus(b *testing.B) {
	for _, drv := range []string{driver.SQLite, driver.Postgres} {
		b.Run(drv, func(b *testing.B) {
			ctx := context.Background()
			store := open(b, drv)
			backends, err := infrastructure.NewSet(ctx, infrastructure.Config{SetJSON: `{"simulated":{"type":"simulated","spec":{}}}`},
				infrastructure.Deps{Static: store.StaticAllocations()}, infrastructure.Types{"simulated": simulated.Factory})
			require.NoError(b, err)
			svc := service.New(store, backends, time.Hour, quiet())
			ids := seed(b, store, svc)
			reads := map[string]func(id string) error{
				"light": func(id string) error {
					st, err := svc.RuntimeOperationStatus(ctx, tenant, id)
					if err == nil && st.State != gqlschema.OperationStateInProgress {
						err = fmt.Errorf("operation %s is %s", id, st.State)
					}
					return err
				},
				"full-reference": func(id string) error { return fullRead(ctx, store, id) },
			}
			for _, name := range []string{"light", "full-reference"} {
				read := reads[name]
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					cpu := cpuTime()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if err := read(ids[i%len(ids)]); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
				})
			}
		})
	}
}
