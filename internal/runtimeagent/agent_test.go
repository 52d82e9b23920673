package runtimeagent_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Connect from the token, synchronise, label the runtime: every status field of the seed's
// table is filled.
func TestConnectsFromTheTokenAndFillsTheStatus(t *testing.T) {
	e := newEnv(t)
	app := e.registerApp(e.prefix+"-orders", directorstandin.Bundle{Name: "api"})
	a := e.agent()

	start := time.Now()
	a.Reconcile(e.ctx())
	t.Logf("time to connect and synchronise once (one pass, 2048-bit key): %v", time.Since(start))

	c, ok := e.connection()
	require.True(t, ok)
	assert.Equal(t, runtimeagent.Synchronized, c.Status.State)
	assert.Equal(t, sandboxDirectorURL(e), c.Spec.ManagementInfo.DirectorURL)
	assert.Contains(t, c.Spec.ManagementInfo.ConnectorURL, "/connector/mtls/graphql")
	cs, ss := c.Status.ConnectionStatus, c.Status.SynchronizationStatus
	require.NotNil(t, cs)
	require.NotNil(t, ss)
	for name, v := range map[string]*metav1.Time{
		"certificateStatus.acquired": cs.CertificateStatus.Acquired, "certificateStatus.notBefore": cs.CertificateStatus.NotBefore,
		"certificateStatus.notAfter": cs.CertificateStatus.NotAfter, "established": cs.Established, "lastSuccess": cs.LastSuccess,
		"lastSync": cs.LastSync, "lastAttempt": ss.LastAttempt, "lastSuccessfulFetch": ss.LastSuccessfulFetch,
		"lastSuccessfulApplication": ss.LastSuccessfulApplication,
	} {
		assert.NotNil(t, v, name)
	}
	assert.Nil(t, cs.Renewed, "not renewed yet")
	assert.True(t, cs.CertificateStatus.NotAfter.After(cs.CertificateStatus.NotBefore.Time))

	// The certificate's CN is the runtime ID; the token is spent.
	cert, err := e.credentials().ClientCertificate()
	require.NoError(t, err)
	assert.Equal(t, e.runtimeID, cert.Subject.CommonName)

	apps := e.clusterApps()
	require.Contains(t, apps, app.Name)
	assert.Equal(t, app.ID, apps[app.Name].Spec.CompassMetadata.ApplicationID)

	// The runtime is labelled in the Director.
	var rt struct {
		R struct {
			Labels map[string]any `json:"labels"`
		} `json:"r"`
	}
	sandboxtest.DirectorGraphQL(t, e.sb.URL, e.tenant, `query($id: ID!) { r: runtime(id: $id) { labels } }`, map[string]any{"id": e.runtimeID}, &rt)
	assert.Equal(t, e.cfg.RuntimeEventsURL, rt.R.Labels[runtimeagent.LabelEventServiceURL])
	assert.Equal(t, e.cfg.RuntimeConsoleURL, rt.R.Labels[runtimeagent.LabelConsoleURL])
}

func sandboxDirectorURL(e *env) string {
	return e.sb.TLSURL + "/director/graphql"
}

// A spent token is refused: the agent reports ConnectionFailed and why, and keeps trying
// with backoff until the Secret holds a new token.
func TestSpentTokenFailsUntilANewOneArrives(t *testing.T) {
	e := newEnv(t)
	// Spend the token: a first agent connects with it, then its connection is forgotten, the
	// certificate included (with it, the agent would resume).
	e.agent().Reconcile(e.ctx())
	e.waitState(runtimeagent.Synchronized)
	require.NoError(t, e.dyn.Resource(runtimeagent.CompassConnectionGVR).Delete(e.ctx(), e.cfg.ConnectionName, metav1.DeleteOptions{}))
	require.NoError(t, e.core.CoreV1().Secrets(e.ns).Delete(e.ctx(), "cluster-client-certificates", metav1.DeleteOptions{}))

	a := e.agent()
	wait1 := a.Reconcile(e.ctx())
	c := e.waitState(runtimeagent.ConnectionFailed)
	require.NotNil(t, c.Status.ConnectionStatus)
	assert.Contains(t, c.Status.ConnectionStatus.Error, "Connector")
	wait2 := a.Reconcile(e.ctx())
	lo := e.cfg.ReconnectBackoffMin
	assert.True(t, wait1 >= lo*4/5 && wait1 <= lo, "the first wait %v is the minimum less up to a fifth", wait1)
	assert.True(t, wait2 >= 2*lo*4/5 && wait2 <= 2*lo, "the backoff doubles (with jitter): %v", wait2)

	e.newToken()
	a.Reconcile(e.ctx())
	e.waitState(runtimeagent.Synchronized)
}

// Renewal happens before expiry with certificates of a few seconds, and across 3 renewals the
// connection is never lost (never ConnectionFailed, never re-established from a token).
func TestRenewsBeforeExpiryWithoutLosingTheConnection(t *testing.T) {
	e := newEnv(t)
	sandboxtest.SetCertificateLifetime(t, e.sb.URL, 4*time.Second)
	e.start()
	first := e.waitState(runtimeagent.Synchronized)
	established := first.Status.ConnectionStatus.Established

	serials := map[string]bool{e.certificateSerial(): true}
	deadline := time.Now().Add(40 * time.Second)
	var lastRenewed *metav1.Time
	renewals := 0
	for renewals < 3 {
		require.True(t, time.Now().Before(deadline), "3 renewals within 40s; saw %d", renewals)
		c, ok := e.connection()
		require.True(t, ok)
		require.NotEqual(t, runtimeagent.ConnectionFailed, c.Status.State, "the connection was lost: %+v", c.Status.ConnectionStatus)
		require.NotEqual(t, runtimeagent.ConnectionMaintenanceFailed, c.Status.State, "maintenance failed: %+v", c.Status.ConnectionStatus)
		require.True(t, established.Equal(c.Status.ConnectionStatus.Established), "re-established from a token")
		if r := c.Status.ConnectionStatus.Renewed; r != nil && (lastRenewed == nil || !r.Equal(lastRenewed)) {
			// The certificate in use is always still valid.
			require.True(t, c.Status.ConnectionStatus.CertificateStatus.NotAfter.After(time.Now()))
			lastRenewed = r
		}
		serial := e.certificateSerial()
		if !serials[serial] {
			serials[serial] = true
			renewals++
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("3 renewals of 4s certificates (renewed with %.0f%% of the lifetime left) without losing the connection", 100*e.cfg.CertValidityRenewalThreshold)
}

// A revoked certificate is not renewed: the agent reports ConnectionMaintenanceFailed and keeps
// its certificate.
func TestRevokedCertificateIsNotRenewed(t *testing.T) {
	e := newEnv(t)
	a := e.agent()
	a.Reconcile(e.ctx())
	e.waitState(runtimeagent.Synchronized)
	serial := e.certificateSerial()

	require.NoError(t, a.Revoke(e.ctx()))
	// Ask for a renewal explicitly: the Connector must refuse it.
	u, err := e.dyn.Resource(runtimeagent.CompassConnectionGVR).Get(e.ctx(), e.cfg.ConnectionName, metav1.GetOptions{})
	require.NoError(t, err)
	u.Object["spec"].(map[string]any)["refreshCredentialsNow"] = true
	_, err = e.dyn.Resource(runtimeagent.CompassConnectionGVR).Update(e.ctx(), u, metav1.UpdateOptions{})
	require.NoError(t, err)

	a.Reconcile(e.ctx())
	c := e.waitState(runtimeagent.ConnectionMaintenanceFailed)
	assert.NotEmpty(t, c.Status.ConnectionStatus.Error)
	assert.Nil(t, c.Status.ConnectionStatus.Renewed)
	assert.Equal(t, serial, e.certificateSerial(), "the revoked certificate was not replaced")
	a.Reconcile(e.ctx())
	c, _ = e.connection()
	assert.Equal(t, runtimeagent.ConnectionMaintenanceFailed, c.Status.State)
}

// Deleting the CompassConnection makes the agent connect again from the Secret (the seed's
// "Reconnect" tutorial).
func TestDeletingTheConnectionReconnects(t *testing.T) {
	e := newEnv(t)
	e.start()
	before := e.waitState(runtimeagent.Synchronized)
	serial := e.certificateSerial()

	e.newToken()
	require.NoError(t, e.dyn.Resource(runtimeagent.CompassConnectionGVR).Delete(e.ctx(), e.cfg.ConnectionName, metav1.DeleteOptions{}))
	after := e.waitFor("a new connection", func(c runtimeagent.CompassConnection) bool {
		return c.UID != before.UID && c.Status.State == runtimeagent.Synchronized
	})
	assert.NotEqual(t, serial, e.certificateSerial(), "a new certificate from the new token")
	assert.Equal(t, before.Spec.ManagementInfo, after.Spec.ManagementInfo)
}

// Killing the agent and starting it again resumes from the stored certificate: no token needed.
func TestRestartResumesFromTheStoredCertificate(t *testing.T) {
	e := newEnv(t)
	stop := e.start()
	before := e.waitState(runtimeagent.Synchronized)
	serial := e.certificateSerial()
	stop()

	// The token in the Secret is spent; make it plainly unusable too.
	e.writeConfig("spent", "https://127.0.0.1:1/connector/graphql")
	app := e.registerApp(e.prefix + "-after-restart")
	e.start()
	e.waitFor("the new application synchronised", func(runtimeagent.CompassConnection) bool {
		_, ok := e.clusterApps()[app.Name]
		return ok
	})
	after, _ := e.connection()
	assert.Equal(t, runtimeagent.Synchronized, after.Status.State)
	assert.True(t, before.Status.ConnectionStatus.Established.Equal(after.Status.ConnectionStatus.Established))
	assert.Equal(t, serial, e.certificateSerial())
}

// Of two replicas only the leader acts; when it stops, the other takes over.
func TestOnlyTheLeaderActs(t *testing.T) {
	e := newEnv(t)
	stopFirst, first := e.startReplica()
	e.waitState(runtimeagent.Synchronized)
	_, second := e.startReplica()
	holder := func() string {
		lease, err := e.core.CoordinationV1().Leases(e.ns).Get(e.ctx(), e.cfg.LeaderElectionName, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, lease.Spec.HolderIdentity)
		return *lease.Spec.HolderIdentity
	}
	assert.Equal(t, first, holder(), "the first replica keeps the lock while it runs")

	stopFirst()
	app := e.registerApp(e.prefix + "-second-replica")
	e.waitFor("the second replica synchronised", func(runtimeagent.CompassConnection) bool {
		_, ok := e.clusterApps()[app.Name]
		return ok
	})
	assert.Equal(t, second, holder())
}

// 50 applications assigned, then 20 removed and 10 changed: the cluster matches the Director
// exactly after one sync each time. An application the agent cannot create does not stop the
// others.
func TestFiftyApplicationsMatchTheDirectorAfterOneSync(t *testing.T) {
	e := newEnv(t)
	a := e.agent()
	a.Reconcile(e.ctx())
	e.waitState(runtimeagent.Synchronized)

	apps := make([]directorstandin.Application, 50)
	for i := range apps {
		auth := directorstandin.AuthBasic
		if i%2 == 1 {
			auth = directorstandin.AuthOAuth
		}
		apps[i] = e.registerApp(fmt.Sprintf("%s-app-%02d", e.prefix, i), directorstandin.Bundle{Name: "api", Auth: auth, OAuthURL: "https://oauth.example.com/token"})
	}
	start := time.Now()
	a.Reconcile(e.ctx())
	t.Logf("sync of 50 new applications (50 Applications + 50 credential Secrets): %v", time.Since(start))
	c, _ := e.connection()
	require.Equal(t, runtimeagent.Synchronized, c.Status.State, "%+v", c.Status.SynchronizationStatus)
	e.requireMatch()

	for _, app := range apps[:20] {
		sandboxtest.UnassignApplication(t, e.sb.URL, app.ID, e.runtimeID)
	}
	for i, app := range apps[20:30] {
		sandboxtest.ChangeApplication(t, e.sb.URL, app.ID, directorstandin.ApplicationInput{
			Tenant: e.tenant, Name: app.Name, Description: fmt.Sprintf("changed %d", i), ProviderName: "ACME 2",
			Labels: map[string]any{"team": "payments"}, Bundles: []directorstandin.Bundle{{Name: "api"}, {Name: "events", Auth: directorstandin.AuthOAuth, OAuthURL: "https://oauth.example.com/token"}},
		})
	}
	start = time.Now()
	a.Reconcile(e.ctx())
	t.Logf("sync of 20 removed and 10 changed applications: %v", time.Since(start))
	c, _ = e.connection()
	require.Equal(t, runtimeagent.Synchronized, c.Status.State, "%+v", c.Status.SynchronizationStatus)
	e.requireMatch()
	assert.Len(t, e.clusterApps(), 30)

	// An Application of that name that is not the agent's cannot be written: that one fails,
	// the others are applied, and the state says so.
	taken := e.prefix + "-taken"
	_, err := e.dyn.Resource(runtimeagent.ApplicationGVR).Create(e.ctx(), unstructuredApp(taken), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.dyn.Resource(runtimeagent.ApplicationGVR).Delete(e.ctx(), taken, metav1.DeleteOptions{})
	})
	e.registerApp(taken)
	other := e.registerApp(e.prefix + "-other")
	a.Reconcile(e.ctx())
	c, _ = e.connection()
	assert.Equal(t, runtimeagent.ResourceApplicationFailed, c.Status.State)
	assert.Contains(t, c.Status.SynchronizationStatus.Error, taken)
	assert.Contains(t, e.clusterApps(), other.Name)
}

// requireMatch checks that the runtime's Applications and credential Secrets are exactly what
// the Director assigns to the runtime.
func (e *env) requireMatch() {
	t := e.t
	t.Helper()
	want := map[string]directorstandin.Application{}
	for _, app := range e.sb.Director.Applications() {
		for _, rt := range app.Runtimes {
			if rt == e.runtimeID {
				want[app.Name] = app
			}
		}
	}
	// The credentials for this runtime, as the Director hands them to it.
	conn, _ := e.connection()
	fetched, err := e.compass.ApplicationsForRuntime(e.ctx(), conn.Spec.ManagementInfo.DirectorURL, e.tenant, e.runtimeID, e.credentials())
	require.NoError(t, err)
	require.Len(t, fetched, len(want))

	have := e.clusterApps()
	require.Len(t, have, len(want))
	secrets, err := e.core.CoreV1().Secrets(e.ns).List(e.ctx(), metav1.ListOptions{LabelSelector: "compass.kyma-project.io/runtime-id=" + e.runtimeID})
	require.NoError(t, err)
	secretData := map[string]map[string][]byte{}
	for _, s := range secrets.Items {
		secretData[s.Name] = s.Data
	}
	nSecrets := 0
	for _, f := range fetched {
		w, ok := want[f.Name]
		require.True(t, ok, "fetched %s, not assigned", f.Name)
		h, ok := have[f.Name]
		require.True(t, ok, "application %s missing in the cluster", f.Name)
		assert.Equal(t, w.ID, h.Spec.CompassMetadata.ApplicationID)
		assert.Len(t, h.Spec.CompassMetadata.Authentication.ClientIDs, 1, "the application's system auth")
		assert.Equal(t, w.Description, h.Spec.Description)
		assert.Equal(t, w.ProviderName, h.Spec.ProviderDisplayName)
		assert.Equal(t, w.Labels["team"], h.Spec.Labels["team"])
		require.Len(t, h.Spec.Services, len(w.Bundles), f.Name)
		for i, svc := range h.Spec.Services {
			pkg := f.Bundles.Data[i]
			assert.Equal(t, pkg.ID, svc.ID)
			assert.Equal(t, pkg.Name, svc.Name)
			require.Len(t, svc.Entries, 1)
			data, ok := secretData[svc.Entries[0].Credentials.SecretName]
			require.True(t, ok, "credentials Secret of %s/%s", f.Name, pkg.Name)
			nSecrets++
			assert.Contains(t, string(pkg.DefaultInstanceAuth.Credential), string(firstValue(data)))
		}
	}
	assert.Len(t, secretData, nSecrets, "no credential Secret left over")
}

func firstValue(m map[string][]byte) []byte {
	for _, k := range []string{"password", "clientSecret"} {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return []byte("<no secret value>")
}

// Passes within APP_MINIMAL_COMPASS_SYNC_TIME do not ask the Director again; spec.resyncNow
// makes the next pass synchronise anyway, and is cleared.
func TestMinimalSyncTimeAndResyncNow(t *testing.T) {
	e := newEnv(t)
	e.cfg.MinimalCompassSyncTime = time.Hour
	a := e.agent()
	a.Reconcile(e.ctx())
	first := e.waitState(runtimeagent.Synchronized)
	app := e.registerApp(e.prefix + "-later")

	a.Reconcile(e.ctx())
	c, _ := e.connection()
	assert.True(t, first.Status.SynchronizationStatus.LastAttempt.Equal(c.Status.SynchronizationStatus.LastAttempt), "no sync within the minimal sync time")
	assert.NotContains(t, e.clusterApps(), app.Name)

	u, err := e.dyn.Resource(runtimeagent.CompassConnectionGVR).Get(e.ctx(), e.cfg.ConnectionName, metav1.GetOptions{})
	require.NoError(t, err)
	u.Object["spec"].(map[string]any)["resyncNow"] = true
	_, err = e.dyn.Resource(runtimeagent.CompassConnectionGVR).Update(e.ctx(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	a.Reconcile(e.ctx())
	assert.Contains(t, e.clusterApps(), app.Name)
	c, _ = e.connection()
	assert.False(t, c.Spec.ResyncNow, "cleared after the sync")
	assert.Equal(t, runtimeagent.Synchronized, c.Status.State)
}
