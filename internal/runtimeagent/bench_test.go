package runtimeagent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/require"
)

// syncFixture is a connected agent whose runtime has n applications assigned in the Director
// (each with one package and its Basic credentials: one Application and one Secret each), and
// how long its first synchronisation of them took.
type syncFixture struct {
	e         *env
	agent     *runtimeagent.Agent
	firstSync time.Duration
}

func newSyncFixture(parent, b testing.TB, n int) *syncFixture {
	// The environment lives as long as the parent benchmark, so that the sub-benchmark's
	// repeated runs share it; failures are reported on the running sub-benchmark.
	e := newEnv(parent)
	e.t = b
	e.cfg.ControllerSyncPeriod = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	parent.Cleanup(cancel)
	// The clients as deployed: an in-cluster configuration leaves client-go's rate limits unset.
	restCfg := kubetest.RESTConfig(b)
	restCfg.QPS, restCfg.Burst = 0, 0
	ctrl, err := runtimeagent.NewController(e.cfg, restCfg, e.compass, e.log)
	require.NoError(b, err)
	a := ctrl.Agent()
	b.Cleanup(a.Close)
	require.NoError(b, a.StartCaches(ctx)) // as the controller does when it starts leading
	a.Reconcile(ctx)
	e.waitState(runtimeagent.Synchronized)
	for i := 0; i < n; i++ {
		e.registerApp(fmt.Sprintf("%s-bench-%04d", e.prefix, i), directorstandin.Bundle{Name: "api", Auth: directorstandin.AuthBasic})
	}
	start := time.Now()
	a.Reconcile(ctx)
	f := &syncFixture{e: e, agent: a, firstSync: time.Since(start)}
	c, _ := e.connection()
	require.Equal(b, runtimeagent.Synchronized, c.Status.State, "%+v", c.Status.SynchronizationStatus)
	require.Len(b, e.clusterApps(), n)
	return f
}

// BenchmarkAgentSync measures, on the real kube-apiserver with the sandbox's Connector and
// Director over TLS, the agent's first synchronisation of 100 and 1,000 applications
// (first-sync-s) and then a pass with nothing to change (ns/op: fetch from the Director,
// compare with the cluster, label the runtime, write the status).
func BenchmarkAgentSync(b *testing.B) {
	for _, n := range []int{100, 1000} {
		var f *syncFixture
		b.Run(fmt.Sprintf("apps=%d", n), func(sb *testing.B) {
			if f == nil {
				f = newSyncFixture(b, sb, n)
			}
			f.e.t = sb
			ctx := sandboxtest.Context(sb, 30*time.Minute)
			sb.ResetTimer()
			start := time.Now()
			for i := 0; i < sb.N; i++ {
				f.agent.Reconcile(ctx)
			}
			pass := time.Since(start) / time.Duration(sb.N)
			sb.StopTimer()
			c, _ := f.e.connection()
			require.Equal(sb, runtimeagent.Synchronized, c.Status.State, "%+v", c.Status.SynchronizationStatus)
			sb.ReportMetric(f.firstSync.Seconds(), "first-sync-s")
			sb.ReportMetric(pass.Seconds(), "pass-s")
			sb.Logf("%d applications: first sync %v, a pass with no change %v", n, f.firstSync.Round(time.Millisecond), pass.Round(time.Millisecond))
		})
	}
}
