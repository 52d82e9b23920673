package runtimeagent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest/gardenersim"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The whole loop on a real kube-apiserver: the provisioner (the gardener backend, the sandbox
// Director) provisions a runtime and writes the agent's Secret where the agent reads it by
// default; the real agent connects to the sandbox's Connector over TLS; the provisioner sees it
// CONNECTED; an application assigned in the Director appears as an Application, and goes away
// when unassigned.
func TestProvisionedRuntimeConnectsAndSynchronises(t *testing.T) {
	e := newEnv(t) // for the sandbox, a namespace and the agent's test settings
	ctx := e.ctx()
	creds := standins.DefaultCredentials()
	dir, err := director.New(director.Config{
		URL: e.sb.URL + "/director/graphql", OAuthTokenURL: e.sb.URL + "/director/oauth/token",
		OAuthClientID: creds.DirectorClientID, OAuthClientSecret: creds.DirectorClientSecret,
	})
	require.NoError(t, err)
	// A cluster of its own (gardener, played by gardenersim without its agent): the provisioner
	// connects the Runtime Agent only there; static and kubernetes runtimes share a host.
	project, kc := gardenersim.Start(t, gardenersim.Options{})
	p := provisionertest.New(t, provisionertest.Options{
		Backends: infrastructure.Config{SetJSON: fmt.Sprintf(`{"gardener": {"type": "gardener", "spec": {"project": %q, "kubeconfig": %q}}}`, project, string(kc))},
		Clusters: runtimeclient.Clusters{},
		Director: dir,
	})

	// The agent as deployed: the configuration Secret and the CompassConnection at their defaults.
	cfg := e.cfg
	cfg.AgentConfigurationSecret, cfg.ConnectionName = "", runtimeclient.CompassConnectionName
	e.cfg = cfg
	conns := e.dyn.Resource(runtimeagent.CompassConnectionGVR)
	t.Cleanup(func() {
		_ = conns.Delete(context.Background(), runtimeclient.CompassConnectionName, metav1.DeleteOptions{})
		_ = e.core.CoreV1().Secrets(runtimeclient.AgentConfigNamespace).Delete(context.Background(), runtimeclient.AgentConfigSecret, metav1.DeleteOptions{})
	})
	_ = conns.Delete(ctx, runtimeclient.CompassConnectionName, metav1.DeleteOptions{})
	e.start()

	name := fmt.Sprintf("agent-e2e-%d", time.Now().UnixNano()%1_000_000)
	in := contracttest.ProvisionInput(name)
	in.ClusterConfig.GardenerConfig.Name = &name
	in.KymaConfig = nil
	start := time.Now()
	st, err := p.Provisioner.Service.ProvisionRuntime(ctx, e.tenant, in)
	require.NoError(t, err)
	var done *gqlschema.OperationStatus
	for done == nil {
		s, err := p.Provisioner.Service.RuntimeOperationStatus(ctx, e.tenant, *st.ID)
		require.NoError(t, err)
		switch s.State {
		case gqlschema.OperationStateSucceeded:
			done = s
		case gqlschema.OperationStateFailed:
			t.Fatalf("provisioning failed: %+v", s.LastError)
		}
		require.Less(t, time.Since(start), time.Minute, "provisioning did not finish: %s", s.Message)
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("provisioning until the agent was Synchronized: %v", time.Since(start))
	status, err := p.Provisioner.Service.RuntimeStatus(ctx, e.tenant, *st.RuntimeID)
	require.NoError(t, err)
	assert.Equal(t, gqlschema.RuntimeAgentConnectionStatusConnected, status.RuntimeConnectionStatus.Status)
	require.NotNil(t, done.CompassRuntimeID)
	e.runtimeID = *done.CompassRuntimeID

	app := sandboxtest.RegisterApplication(t, e.sb.URL, directorstandin.ApplicationInput{Tenant: e.tenant, Name: e.prefix + "-e2e", Bundles: []directorstandin.Bundle{{Name: "api"}}})
	sandboxtest.AssignApplication(t, e.sb.URL, app.ID, e.runtimeID)
	e.waitFor("the assigned application", func(runtimeagent.CompassConnection) bool {
		_, ok := e.clusterApps()[app.Name]
		return ok
	})
	sandboxtest.UnassignApplication(t, e.sb.URL, app.ID, e.runtimeID)
	e.waitFor("the unassigned application gone", func(runtimeagent.CompassConnection) bool {
		_, ok := e.clusterApps()[app.Name]
		return !ok
	})
}
