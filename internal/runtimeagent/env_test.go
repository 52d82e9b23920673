package runtimeagent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// env is one runtime: the sandbox's Connector and Director over TLS on loopback, a private
// namespace on the real kube-apiserver for the agent's Secrets, and a runtime registered in
// the Director with a one-time token in the agent's configuration Secret.
type env struct {
	t            testing.TB
	sb           *standins.Listeners
	core         kubernetes.Interface
	dyn          dynamic.Interface
	ns           string
	tenant       string
	runtimeID    string
	prefix       string // of application names (Applications are cluster-scoped)
	connectorURL string // the token-secured Connector
	cfg          runtimeagent.Config
	compass      *runtimeagent.Compass
	log          *logrus.Logger
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func newEnv(t testing.TB) *env {
	t.Helper()
	sb := sandboxtest.ServeTLS(t, standins.Options{})
	ns := kubetest.Namespace(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, sb.CAPEM(), 0o600))
	e := &env{t: t, sb: sb, core: kubetest.Clientset(t), dyn: kubetest.Dynamic(t), ns: ns, tenant: "tenant-" + randomHex(t, 4), prefix: "a" + randomHex(t, 4)}
	e.log = logrus.New()
	if !testing.Verbose() {
		e.log.SetLevel(logrus.ErrorLevel)
	}
	e.cfg = runtimeagent.Config{
		AgentConfigurationSecret:     ns + "/compass-agent-configuration",
		ClusterCertificatesSecret:    ns + "/cluster-client-certificates",
		CACertificatesSecret:         ns + "/ca-certificates",
		ConnectionName:               ns, // unique: the resource is cluster-scoped
		ControllerSyncPeriod:         100 * time.Millisecond,
		MinimalCompassSyncTime:       0,
		CertValidityRenewalThreshold: 0.3,
		CertKeyBits:                  2048, // the sandbox Connector's minimum: fast enough for tests
		ConnectorCAFile:              caFile,
		RuntimeEventsURL:             "https://gateway." + ns + ".example.com",
		RuntimeConsoleURL:            "https://console." + ns + ".example.com",
		CredentialsNamespace:         ns,
		CallTimeout:                  10 * time.Second,
		ReconnectBackoffMin:          50 * time.Millisecond,
		ReconnectBackoffMax:          500 * time.Millisecond,
		LeaderElectionNamespace:      ns,
		LeaderElectionName:           "compass-runtime-agent",
		// Short enough for fast failovers, long enough that a loaded machine's slow renewals
		// do not make the leader stop acting (it stops when a renewal is older than the
		// renew deadline).
		LeaseDuration: 5 * time.Second,
		RenewDeadline: 4 * time.Second,
		RetryPeriod:   300 * time.Millisecond,
	}
	var err error
	e.compass, err = runtimeagent.NewCompass(caFile, e.cfg.CallTimeout)
	require.NoError(t, err)
	var token, connectorURL string
	e.runtimeID, token, connectorURL = sandboxtest.OneTimeToken(t, sb.URL, e.tenant, "runtime-"+ns)
	e.connectorURL = connectorURL
	e.writeConfig(token, connectorURL)
	return e
}

func (e *env) ctx() context.Context { return sandboxtest.Context(e.t, 2*time.Minute) }

// writeConfig writes the agent's configuration Secret, as the provisioner does.
func (e *env) writeConfig(token, connectorURL string) {
	e.t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "compass-agent-configuration", Namespace: e.ns},
		StringData: map[string]string{"CONNECTOR_URL": connectorURL, "RUNTIME_ID": e.runtimeID, "TENANT": e.tenant, "TOKEN": token},
	}
	secrets := e.core.CoreV1().Secrets(e.ns)
	if _, err := secrets.Get(e.ctx(), s.Name, metav1.GetOptions{}); err == nil {
		_, err = secrets.Update(e.ctx(), s, metav1.UpdateOptions{})
		require.NoError(e.t, err)
		return
	}
	_, err := secrets.Create(e.ctx(), s, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// newToken puts a new one-time token for the runtime into the configuration Secret.
func (e *env) newToken() {
	e.t.Helper()
	var tok struct {
		T struct {
			Token        string `json:"token"`
			ConnectorURL string `json:"connectorURL"`
		} `json:"t"`
	}
	sandboxtest.DirectorGraphQL(e.t, e.sb.URL, e.tenant, `mutation($id: ID!) { t: requestOneTimeTokenForRuntime(id: $id) { token connectorURL } }`,
		map[string]any{"id": e.runtimeID}, &tok)
	e.writeConfig(tok.T.Token, tok.T.ConnectorURL)
}

func (e *env) agent() *runtimeagent.Agent {
	e.t.Helper()
	return e.agentWith(e.compass)
}

// agentWith is an agent talking to the Connector through c.
func (e *env) agentWith(c runtimeagent.Connector) *runtimeagent.Agent {
	e.t.Helper()
	a, err := runtimeagent.NewAgent(e.cfg, runtimeagent.Deps{Core: e.core, Dynamic: e.dyn, Connector: c, Director: e.compass, Log: e.log})
	require.NoError(e.t, err)
	e.t.Cleanup(a.Close)
	require.NoError(e.t, a.StartCaches(e.ctx()))
	return a
}

// start runs the agent's controller (leader election included) until the returned stop.
func (e *env) start() (stop func()) {
	stop, _ = e.startReplica()
	return stop
}

// startReplica is start also returning the replica's identity in the leader lock.
func (e *env) startReplica() (stop func(), identity string) {
	e.t.Helper()
	ctrl, err := runtimeagent.NewController(e.cfg, kubetest.RESTConfig(e.t), e.compass, e.log)
	require.NoError(e.t, err)
	stop = testenv.Background(e.t, ctrl.Run)
	return stop, ctrl.Identity()
}

// connection reads the CompassConnection (ok false when there is none).
func (e *env) connection() (runtimeagent.CompassConnection, bool) {
	e.t.Helper()
	var c runtimeagent.CompassConnection
	u, err := e.dyn.Resource(runtimeagent.CompassConnectionGVR).Get(e.ctx(), e.cfg.ConnectionName, metav1.GetOptions{})
	if err != nil {
		return c, false
	}
	require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c))
	return c, true
}

// waitFor polls the CompassConnection until cond holds, failing after a minute.
func (e *env) waitFor(what string, cond func(c runtimeagent.CompassConnection) bool) runtimeagent.CompassConnection {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, ok := e.connection()
		if ok && cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("waiting for %s: CompassConnection %+v", what, c.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) waitState(want runtimeagent.ConnectionState) runtimeagent.CompassConnection {
	e.t.Helper()
	return e.waitFor(string(want), func(c runtimeagent.CompassConnection) bool { return c.Status.State == want })
}

// certificateSerial is the serial number of the stored client certificate.
func (e *env) certificateSerial() string {
	e.t.Helper()
	s, err := e.core.CoreV1().Secrets(e.ns).Get(e.ctx(), "cluster-client-certificates", metav1.GetOptions{})
	require.NoError(e.t, err)
	cert, err := runtimeagent.ClientCredentials{CertificateChain: s.Data["crt"]}.ClientCertificate()
	require.NoError(e.t, err)
	return cert.SerialNumber.String()
}

// credentials are the stored client certificate, key and CA.
func (e *env) credentials() runtimeagent.ClientCredentials {
	e.t.Helper()
	c, err := e.core.CoreV1().Secrets(e.ns).Get(e.ctx(), "cluster-client-certificates", metav1.GetOptions{})
	require.NoError(e.t, err)
	ca, err := e.core.CoreV1().Secrets(e.ns).Get(e.ctx(), "ca-certificates", metav1.GetOptions{})
	require.NoError(e.t, err)
	return runtimeagent.ClientCredentials{CertificateChain: c.Data["crt"], PrivateKey: c.Data["key"], CACertificate: ca.Data["cacert"]}
}

// registerApp registers an application in the runtime's tenant and assigns it to the runtime.
func (e *env) registerApp(name string, bundles ...directorstandin.Bundle) directorstandin.Application {
	e.t.Helper()
	app := sandboxtest.RegisterApplication(e.t, e.sb.URL, directorstandin.ApplicationInput{
		Tenant: e.tenant, Name: name, Description: "the " + name + " application", ProviderName: "ACME",
		Labels: map[string]any{"team": "orders"}, Bundles: bundles,
	})
	sandboxtest.AssignApplication(e.t, e.sb.URL, app.ID, e.runtimeID)
	return app
}

// clusterApps are the runtime's Application resources by name.
func (e *env) clusterApps() map[string]runtimeagent.Application {
	e.t.Helper()
	list, err := e.dyn.Resource(runtimeagent.ApplicationGVR).List(e.ctx(), metav1.ListOptions{LabelSelector: "compass.kyma-project.io/runtime-id=" + e.runtimeID})
	require.NoError(e.t, err)
	out := map[string]runtimeagent.Application{}
	for i := range list.Items {
		var a runtimeagent.Application
		require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &a))
		out[a.Name] = a
	}
	return out
}

func unstructuredApp(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "applicationconnector.kyma-project.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"description": "not the agent's"},
	}}
}
