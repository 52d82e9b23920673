package runtimeagent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
)

// Agent is one pass of the controller: check the connection, connect or maintain it, and
// synchronise. Everything that decides the next pass is in the CompassConnection and the
// Secrets; only the reconnection backoff is kept in memory.
type Agent struct {
	cfg                                Config
	core                               kubernetes.Interface
	dyn                                dynamic.Interface
	connector                          Connector
	director                           Director
	log                                logrus.FieldLogger
	now                                func() time.Time
	configSecret, certSecret, caSecret SecretRef
	metrics                            *Metrics
	events                             record.EventRecorder
	stopEvents                         func()
	closeOnce                          sync.Once
	caches                             *caches // nil until startCaches: then reads come from informers
	failures                           int     // consecutive failed connection attempts
	maintenanceFailures                int     // consecutive failed checks or renewals of the connection
	// certRefused: the certificate-secured Connector refused the stored certificate (revoked):
	// it cannot be renewed, and a new token in the configuration Secret is tried at once.
	certRefused bool
	// failedToken is the hash of a token tried for a refused certificate that failed too: it is
	// not tried again.
	failedToken string
}

// Deps are the systems the agent talks to.
type Deps struct {
	Core      kubernetes.Interface
	Dynamic   dynamic.Interface
	Connector Connector
	Director  Director
	Log       logrus.FieldLogger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Metrics receives the agent's metrics (NewMetrics when nil).
	Metrics *Metrics
	// Events records Events on the CompassConnection (through Core when nil).
	Events record.EventRecorder
}

// NewAgent checks cfg and returns the agent.
func NewAgent(cfg Config, d Deps) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, core: d.Core, dyn: d.Dynamic, connector: d.Connector, director: d.Director, log: d.Log, now: d.Now,
		metrics: d.Metrics, events: d.Events, stopEvents: func() {}}
	if a.metrics == nil {
		a.metrics = NewMetrics()
	}
	if a.events == nil && d.Core != nil {
		a.events, a.stopEvents = newRecorder(d.Core)
	}
	if a.log == nil {
		a.log = logrus.New()
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.configSecret, _ = ParseSecretRef(cfg.AgentConfigurationSecret)
	a.certSecret, _ = ParseSecretRef(cfg.ClusterCertificatesSecret)
	a.caSecret, _ = ParseSecretRef(cfg.CACertificatesSecret)
	return a, nil
}

// Metrics are the agent's metrics.
func (a *Agent) Metrics() *Metrics { return a.metrics }

// Close stops recording Events and the caches.
func (a *Agent) Close() {
	a.closeOnce.Do(func() {
		a.stopEvents()
		if a.caches != nil {
			a.caches.stop()
		}
	})
}

func (a *Agent) stamp() *metav1.Time {
	t := metav1.NewTime(a.now().UTC().Truncate(time.Second))
	return &t
}

// storedCertificate is the certificate the agent holds: err says why it has none usable
// (missing, unreadable or expired).
type storedCertificate struct {
	creds ClientCredentials
	rec   connectionRecord
	cert  *x509.Certificate
	err   error
}

func (a *Agent) storedCertificate(ctx context.Context) storedCertificate {
	var s storedCertificate
	if s.creds, s.rec, s.err = loadCredentials(ctx, a.core, a.certSecret, a.caSecret); s.err != nil {
		return s
	}
	if s.cert, s.err = s.creds.ClientCertificate(); s.err != nil {
		return s
	}
	if !a.now().Before(s.cert.NotAfter) {
		s.err = fmt.Errorf("the client certificate expired at %s", s.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return s
}

// Reconcile makes one pass and returns when the next one is due.
func (a *Agent) Reconcile(ctx context.Context) time.Duration {
	conn, err := a.getConnection(ctx)
	if err != nil {
		a.log.WithError(err).Error("reading the CompassConnection")
		return a.cfg.ReconnectBackoffMin
	}
	stored := a.storedCertificate(ctx)
	note := "" // what reconnecting has to say, kept for this pass's status
	if conn == nil || conn.Status.State == ConnectionFailed || stored.err != nil || a.replacesRefused(ctx, stored) {
		if conn, stored, err = a.reconnect(ctx, conn, stored); err != nil {
			a.failures++
			wait := a.backoff()
			a.log.WithError(err).WithField("retryIn", wait).Warn("connecting to Compass failed")
			return wait
		}
		a.failures = 0
		if conn.Status.ConnectionStatus != nil {
			note = conn.Status.ConnectionStatus.Error
		}
	}
	creds, cert := stored.creds, stored.cert

	st := conn.Status
	if st.ConnectionStatus == nil {
		st.ConnectionStatus = &ConnectionStatus{}
	}
	if creds, cert, err = a.maintain(ctx, conn, stored, &st); err != nil {
		st.State, st.ConnectionStatus.Error = ConnectionMaintenanceFailed, err.Error()
		a.certRefused = errors.Is(err, connector.ErrUnauthorized)
		a.metrics.tokenNeeded.Set(flag(a.certRefused))
		if a.certRefused {
			// Revoked: no renewal will work, so the connection ends when the certificate
			// expires; only a new one-time token restores it. The Director hears FAILED while
			// the certificate still lets the agent say so.
			st.ConnectionStatus.Error = fmt.Sprintf("%s: the Connector refuses the certificate (revoked?), which cannot be renewed and expires at %s; %s",
				err, cert.NotAfter.UTC().Format(time.RFC3339), NewTokenNeeded)
			a.reportCondition(ctx, conn, creds, cert, ConditionFailed)
		}
		a.maintenanceFailures++
		a.metrics.renewalFailures.Inc()
		expiring := needsRenewal(cert, a.cfg.CertValidityRenewalThreshold, a.now())
		a.metrics.expiringWithoutRenewal.Set(flag(expiring))
		if expiring && a.events != nil {
			a.events.Eventf(connectionRef(conn), corev1.EventTypeWarning, ReasonExpiresWithoutRenewal,
				"the client certificate expires at %s and renewing it fails: %v", cert.NotAfter.UTC().Format(time.RFC3339), err)
		}
		a.log.WithError(err).WithField("expiringWithoutRenewal", expiring).Warn("maintaining the connection failed")
	} else {
		a.maintenanceFailures, a.certRefused = 0, false
		a.metrics.expiringWithoutRenewal.Set(0)
		a.metrics.tokenNeeded.Set(0)
		st.ConnectionStatus.Error = strings.TrimPrefix(note+"; "+identityNote(conn, cert), "; ")
		st.ConnectionStatus.Error = strings.TrimSuffix(st.ConnectionStatus.Error, "; ")
		if a.syncDue(conn) {
			a.synchronize(ctx, conn, creds, cert, &st)
			// As the original agent, CONNECTED once synchronised; FAILED when the Director
			// cannot be read (if it can be told).
			switch st.State {
			case Synchronized:
				a.reportCondition(ctx, conn, creds, cert, ConditionConnected)
			case SynchronizationFailed:
				a.reportCondition(ctx, conn, creds, cert, ConditionFailed)
			}
		} else if st.State == ConnectionMaintenanceFailed {
			st.State = Connected
		}
	}
	if err := a.writeStatus(ctx, conn.Name, st); err != nil {
		a.log.WithError(err).Error("writing the CompassConnection status")
		return a.cfg.ReconnectBackoffMin
	}
	a.report(conn.Status.State, conn, st)
	next := a.nextPass(cert)
	if a.maintenanceFailures > 0 {
		// Not at once again (the threshold is passed): backing off, but checking again right
		// after the certificate expires, when reconnecting takes over.
		next = min(a.backoffFor(a.maintenanceFailures), max(cert.NotAfter.Sub(a.now())+time.Second, a.cfg.ReconnectBackoffMin))
	}
	return next
}

// replacesRefused tells whether a pass should connect with the configuration Secret's token
// although the stored certificate is valid: the Connector refuses the certificate (revoked) and
// the Secret holds a token other than the one the certificate came from (reconnectRuntimeAgent
// wrote one) that has not failed already.
func (a *Agent) replacesRefused(ctx context.Context, stored storedCertificate) bool {
	if !a.certRefused || stored.err != nil {
		return false
	}
	agentCfg, err := readAgentConfiguration(ctx, a.core, a.configSecret)
	if err != nil {
		return false
	}
	h := hashToken(agentCfg.Token)
	return h != stored.rec.TokenHash && h != a.failedToken
}

// reportCondition sets the runtime's status condition in the Director (the provisioner's
// runtimeConnectionStatus follows it); a failure is logged, the next pass tries again.
func (a *Agent) reportCondition(ctx context.Context, conn *CompassConnection, creds ClientCredentials, cert *x509.Certificate, condition string) {
	runtimeID, tenant, url := cert.Subject.CommonName, conn.Annotations[annotationTenant], conn.Spec.ManagementInfo.DirectorURL
	if runtimeID == "" || tenant == "" || url == "" {
		return
	}
	cctx, cancel := a.bounded(ctx)
	err := a.director.SetRuntimeStatusCondition(cctx, url, tenant, runtimeID, condition, creds)
	cancel()
	if err != nil {
		a.metrics.conditionReports.WithLabelValues(condition, "failed").Inc()
		a.log.WithError(err).WithField("condition", condition).Warn("reporting the runtime's status condition to the Director failed")
		return
	}
	a.metrics.conditionReports.WithLabelValues(condition, "ok").Inc()
}

// identityNote says when the configuration Secret's RUNTIME_ID is not the certificate's
// identity, which the agent acts as (the Director authorises by the certificate).
func identityNote(conn *CompassConnection, cert *x509.Certificate) string {
	configured := conn.Annotations[annotationConfiguredRuntimeID]
	if configured == "" || configured == cert.Subject.CommonName {
		return ""
	}
	return fmt.Sprintf("RUNTIME_ID %s of the configuration Secret is not the certificate's identity: the agent acts as runtime %s (the certificate's CN)", configured, cert.Subject.CommonName)
}

// reconnect restores the connection of a pass that found no CompassConnection, a failed one or
// no usable certificate. A valid stored certificate is the connection: it is resumed unless the
// configuration Secret holds another token than the one it was obtained with (the seed's
// "Reconnect" tutorial), and resumed anyway when that token fails, so the agent is never
// stranded while it holds a valid certificate.
func (a *Agent) reconnect(ctx context.Context, conn *CompassConnection, stored storedCertificate) (*CompassConnection, storedCertificate, error) {
	agentCfg, cfgErr := readAgentConfiguration(ctx, a.core, a.configSecret)
	if stored.err == nil && (cfgErr != nil || hashToken(agentCfg.Token) == stored.rec.TokenHash) {
		a.log.Info("resuming the connection with the stored certificate")
		return a.resume(ctx, conn, stored, "")
	}
	prev := ConnectionState("")
	if conn != nil {
		prev = conn.Status.State
	}
	reason := "no CompassConnection"
	switch {
	case stored.err != nil:
		reason = stored.err.Error()
	case conn != nil:
		reason = "a new one-time token in the configuration Secret"
	}
	a.log.WithField("reason", reason).Info("connecting to Compass with the one-time token")
	saved, fresh, err := a.connect(ctx, conn, agentCfg, cfgErr)
	if err == nil {
		a.certRefused, a.failedToken = false, ""
		a.log.WithField("notAfter", fresh.cert.NotAfter).Info("connected to Compass")
		a.metrics.connectionAttempts.WithLabelValues("token").Inc()
		a.metrics.tokenNeeded.Set(0)
		a.report(prev, saved, saved.Status)
		if note := identityNote(saved, fresh.cert); note != "" && a.events != nil {
			a.events.Event(connectionRef(saved), corev1.EventTypeWarning, ReasonIdentity, note)
		}
		return saved, fresh, nil
	}
	if stored.err == nil {
		a.failedToken = hashToken(agentCfg.Token)
		a.log.WithError(err).Warn("the one-time token failed: resuming with the stored certificate")
		return a.resume(ctx, conn, stored, "the one-time token of the configuration Secret failed ("+err.Error()+"): resumed with the stored certificate")
	}
	a.metrics.connectionAttempts.WithLabelValues("failed").Inc()
	a.metrics.tokenNeeded.Set(flag(tokenNeeded(err, cfgErr)))
	a.recordFailure(ctx, conn, agentCfg, cfgErr, err)
	return nil, storedCertificate{}, err
}

// recordFailure says ConnectionFailed and why in the CompassConnection.
func (a *Agent) recordFailure(ctx context.Context, conn *CompassConnection, agentCfg AgentConfiguration, cfgErr, cause error) {
	if conn == nil {
		conn = &CompassConnection{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.ConnectionName}}
	}
	if conn.Spec.ManagementInfo.ConnectorURL == "" {
		conn.Spec.ManagementInfo.ConnectorURL = agentCfg.ConnectorURL
	}
	st := conn.Status
	st.State = ConnectionFailed
	if st.ConnectionStatus == nil {
		st.ConnectionStatus = &ConnectionStatus{}
	}
	st.ConnectionStatus.LastSync = a.stamp()
	st.ConnectionStatus.Error = cause.Error()
	if tokenNeeded(cause, cfgErr) {
		st.ConnectionStatus.Error += ": " + NewTokenNeeded
	}
	prev := conn.Status.State
	saved, err := a.saveConnection(ctx, conn, st)
	if err != nil {
		a.log.WithError(err).Error("recording the failed connection")
		return
	}
	a.report(prev, saved, st)
}

// NewTokenNeeded ends the status error of a connection only a new one-time token can restore:
// the Connector refused the token or the certificate, or there is no token to try. /readyz is
// not ready while the status says so.
const NewTokenNeeded = "a new one-time token is needed: run the provisioner's reconnectRuntimeAgent for this runtime"

// tokenNeeded tells whether a failed connection needs a new one-time token: the Connector
// refused the token, or the configuration Secret has none (missing, incomplete).
func tokenNeeded(cause, cfgErr error) bool {
	if connector.IsRefused(cause) {
		return true
	}
	return cfgErr != nil && errors.Is(cause, cfgErr) && (apierrors.IsNotFound(cfgErr) || errors.Is(cfgErr, errIncompleteConfiguration))
}

// resume makes the CompassConnection say Connected with the stored certificate, keeping what
// it already says of the connection.
func (a *Agent) resume(ctx context.Context, conn *CompassConnection, stored storedCertificate, note string) (*CompassConnection, storedCertificate, error) {
	now := a.stamp()
	if conn == nil {
		conn = &CompassConnection{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.ConnectionName}}
	}
	prev := conn.Status.State
	mi := conn.Spec.ManagementInfo
	if mi.ConnectorURL == "" || mi.DirectorURL == "" || conn.Status.State == ConnectionFailed {
		mi = ManagementInfo{ConnectorURL: stored.rec.ConnectorURL, DirectorURL: stored.rec.DirectorURL}
	}
	if mi.ConnectorURL == "" || mi.DirectorURL == "" {
		return nil, storedCertificate{}, errors.New("the certificates Secret does not say the Compass URLs of its certificate: a new one-time token is needed")
	}
	conn.Spec.ManagementInfo = mi
	if conn.Annotations == nil {
		conn.Annotations = map[string]string{}
	}
	conn.Annotations[annotationRuntimeID] = stored.cert.Subject.CommonName
	if stored.rec.Tenant != "" {
		conn.Annotations[annotationTenant] = stored.rec.Tenant
	}
	if stored.rec.ConfiguredRuntimeID != "" {
		conn.Annotations[annotationConfiguredRuntimeID] = stored.rec.ConfiguredRuntimeID
	}
	cs := ConnectionStatus{CertificateStatus: certificateStatus(now, stored.cert), Established: now, LastSuccess: now, LastSync: now, Error: note}
	if old := conn.Status.ConnectionStatus; old != nil {
		if old.Established != nil {
			cs.Established = old.Established
		}
		if old.CertificateStatus.Acquired != nil && old.CertificateStatus.NotAfter.Equal(cs.CertificateStatus.NotAfter) {
			cs.CertificateStatus.Acquired = old.CertificateStatus.Acquired
		}
		cs.Renewed = old.Renewed
	}
	st := CompassConnectionStatus{State: Connected, ConnectionStatus: &cs, SynchronizationStatus: conn.Status.SynchronizationStatus}
	saved, err := a.saveConnection(ctx, conn, st)
	if err != nil {
		return nil, storedCertificate{}, err
	}
	a.metrics.connectionAttempts.WithLabelValues("resumed").Inc()
	a.report(prev, saved, st)
	return saved, stored, nil
}

// nextPass is the sync period, or earlier when the certificate is due for renewal before.
func (a *Agent) nextPass(cert *x509.Certificate) time.Duration {
	next := a.cfg.ControllerSyncPeriod
	if cert == nil {
		return next
	}
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	due := cert.NotAfter.Add(-time.Duration(float64(lifetime) * a.cfg.CertValidityRenewalThreshold)).Sub(a.now())
	// A little past the threshold, so the pass sees it crossed.
	if due += lifetime / 100; due < next {
		next = max(due, 10*time.Millisecond)
	}
	return next
}

func (a *Agent) backoff() time.Duration { return a.backoffFor(a.failures) }

// backoffFor is the wait after n consecutive failures: doubling from APP_RECONNECT_BACKOFF_MIN,
// capped at APP_RECONNECT_BACKOFF_MAX, up to a fifth less at random so that runtimes failing
// together spread their retries.
func (a *Agent) backoffFor(n int) time.Duration {
	d := a.cfg.ReconnectBackoffMin
	for i := 1; i < n && d < a.cfg.ReconnectBackoffMax; i++ {
		d *= 2
	}
	d = min(d, a.cfg.ReconnectBackoffMax)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

func (a *Agent) syncDue(conn *CompassConnection) bool {
	s := conn.Status.SynchronizationStatus
	if conn.Spec.ResyncNow || s == nil || s.LastAttempt == nil || conn.Status.State == Connected {
		return true
	}
	return a.now().Sub(s.LastAttempt.Time) >= a.cfg.MinimalCompassSyncTime
}

func (a *Agent) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.cfg.CallTimeout)
}

// connect establishes the connection from the configuration Secret (the seed's "Establish a
// secure connection" tutorial) and records it in the CompassConnection.
func (a *Agent) connect(ctx context.Context, conn *CompassConnection, agentCfg AgentConfiguration, cfgErr error) (*CompassConnection, storedCertificate, error) {
	if cfgErr != nil {
		return nil, storedCertificate{}, cfgErr
	}
	if conn == nil {
		conn = &CompassConnection{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.ConnectionName}}
	}
	creds, info, rec, err := a.establish(ctx, agentCfg)
	if err != nil {
		return nil, storedCertificate{}, err
	}
	cert, err := creds.ClientCertificate()
	if err != nil {
		return nil, storedCertificate{}, err
	}
	now := a.stamp()
	conn.Spec.ManagementInfo = ManagementInfo{ConnectorURL: info.CertificateSecuredConnectorURL, DirectorURL: info.DirectorURL}
	if conn.Annotations == nil {
		conn.Annotations = map[string]string{}
	}
	conn.Annotations[annotationRuntimeID], conn.Annotations[annotationTenant] = cert.Subject.CommonName, agentCfg.Tenant
	conn.Annotations[annotationConfiguredRuntimeID] = agentCfg.RuntimeID
	st := CompassConnectionStatus{
		State: Connected,
		ConnectionStatus: &ConnectionStatus{
			CertificateStatus: certificateStatus(now, cert),
			Established:       now, LastSuccess: now, LastSync: now,
		},
		SynchronizationStatus: conn.Status.SynchronizationStatus,
	}
	// The certificate is stored: from here on it is the connection, whatever happens to this
	// write (a failed save is resumed from the certificate by the next pass).
	saved, err := a.saveConnection(ctx, conn, st)
	if err != nil {
		return nil, storedCertificate{}, err
	}
	return saved, storedCertificate{creds: creds, rec: rec, cert: cert}, nil
}

// signAttempts is how often the token-secured signing is tried in one pass: the next token
// stays valid until a signing succeeds.
const signAttempts = 3

// establish exchanges the one-time token for a client certificate and stores it. The next token
// the configuration query hands out is kept in the certificates Secret before it is used, so a
// signing that fails (here, or in a pass after a restart) is tried again with it rather than
// with the spent token.
func (a *Agent) establish(ctx context.Context, agentCfg AgentConfiguration) (ClientCredentials, connector.Configuration, connectionRecord, error) {
	tokenHash := hashToken(agentCfg.Token)
	token := agentCfg.Token
	next, ok, err := nextToken(ctx, a.core, a.certSecret, tokenHash)
	if err != nil {
		return ClientCredentials{}, connector.Configuration{}, connectionRecord{}, err
	}
	if ok {
		token = next // the configuration Secret's token was spent by an earlier attempt
	}
	cctx, cancel := a.bounded(ctx)
	info, err := a.connector.Configuration(cctx, agentCfg.ConnectorURL, token)
	cancel()
	if err != nil {
		return ClientCredentials{}, info, connectionRecord{}, err
	}
	if err := keepNextToken(ctx, a.core, a.certSecret, tokenHash, info.Token); err != nil {
		a.log.WithError(err).Warn("the next one-time token is not kept: a failed signing cannot be retried after a restart")
	}
	rec := connectionRecord{TokenHash: tokenHash, ConnectorURL: info.CertificateSecuredConnectorURL, DirectorURL: info.DirectorURL,
		Tenant: agentCfg.Tenant, ConfiguredRuntimeID: agentCfg.RuntimeID}
	creds, err := a.newCertificate(ctx, info.Subject, rec, func(ctx context.Context, csr []byte) (connector.Certificates, error) {
		var set connector.Certificates
		var err error
		wait := a.cfg.ReconnectBackoffMin
		for i := 0; i < signAttempts; i++ {
			cctx, cancel := a.bounded(ctx)
			set, err = a.connector.SignCSR(cctx, agentCfg.ConnectorURL, info.Token, csr)
			cancel()
			if err == nil || connector.IsRefused(err) || i == signAttempts-1 {
				break
			}
			a.log.WithError(err).WithField("retryIn", wait).Warn("signing the CSR failed: trying again with the same token")
			select {
			case <-ctx.Done():
				return set, errors.Join(err, ctx.Err())
			case <-time.After(wait):
			}
			wait *= 2
		}
		return set, err
	})
	if err != nil {
		return creds, info, rec, err
	}
	return creds, info, rec, nil
}

// newCertificate makes a key and CSR for subject, has sign sign it and stores the result.
func (a *Agent) newCertificate(ctx context.Context, subject string, rec connectionRecord, sign func(context.Context, []byte) (connector.Certificates, error)) (ClientCredentials, error) {
	keyPEM, csrPEM, err := newKeyAndCSR(ctx, subject, a.cfg.CertKeyBits)
	if err != nil {
		return ClientCredentials{}, err
	}
	set, err := sign(ctx, csrPEM)
	if err != nil {
		return ClientCredentials{}, err
	}
	creds := ClientCredentials{CertificateChain: set.Chain, PrivateKey: keyPEM, CACertificate: set.CA}
	// Refuse what does not work before replacing what does.
	if _, err := creds.TLSConfig(); err != nil {
		return ClientCredentials{}, fmt.Errorf("the Connector's certificates: %w", err)
	}
	if err := storeCredentials(ctx, a.core, a.certSecret, a.caSecret, creds, rec); err != nil {
		return ClientCredentials{}, err
	}
	return creds, nil
}

// maintain checks the connection on the certificate-secured Connector and renews the
// certificate when less than the threshold of its lifetime remains (or when asked to).
func (a *Agent) maintain(ctx context.Context, conn *CompassConnection, stored storedCertificate, st *CompassConnectionStatus) (ClientCredentials, *x509.Certificate, error) {
	creds, cert, rec := stored.creds, stored.cert, stored.rec
	cs := st.ConnectionStatus
	cs.LastSync = a.stamp()
	cs.CertificateStatus.NotBefore, cs.CertificateStatus.NotAfter = timePtr(cert.NotBefore), timePtr(cert.NotAfter)
	url := conn.Spec.ManagementInfo.ConnectorURL
	cctx, cancel := a.bounded(ctx)
	info, err := a.connector.CertificateConfiguration(cctx, url, creds)
	cancel()
	if err != nil {
		return creds, cert, err
	}
	if !needsRenewal(cert, a.cfg.CertValidityRenewalThreshold, a.now()) && !conn.Spec.RefreshCredentialsNow {
		cs.LastSuccess = a.stamp()
		return creds, cert, nil
	}
	subject := info.Subject
	if subject == "" {
		subject = cert.Subject.String()
	}
	renewed, err := a.newCertificate(ctx, subject, rec, func(ctx context.Context, csr []byte) (connector.Certificates, error) {
		cctx, cancel := a.bounded(ctx)
		defer cancel()
		return a.connector.RenewCertificate(cctx, url, creds, csr)
	})
	if err != nil {
		return creds, cert, err
	}
	newCert, err := renewed.ClientCertificate()
	if err != nil {
		return creds, cert, err
	}
	now := a.stamp()
	cs.CertificateStatus = certificateStatus(now, newCert)
	cs.Renewed, cs.LastSuccess = now, now
	a.metrics.renewals.Inc()
	a.log.WithField("notAfter", newCert.NotAfter).Info("renewed the client certificate")
	if conn.Spec.RefreshCredentialsNow {
		if err := a.clearSpecFlags(ctx, conn.Name); err != nil {
			a.log.WithError(err).Warn("clearing spec.refreshCredentialsNow")
		}
	}
	return renewed, newCert, nil
}

func certificateStatus(acquired *metav1.Time, cert *x509.Certificate) CertificateStatus {
	return CertificateStatus{Acquired: acquired, NotBefore: timePtr(cert.NotBefore), NotAfter: timePtr(cert.NotAfter)}
}

func timePtr(t time.Time) *metav1.Time {
	m := metav1.NewTime(t.UTC())
	return &m
}

// Revoke revokes the agent's current certificate (the seed's "Revoke" tutorial); the agent
// then reports ConnectionMaintenanceFailed until the certificate expires and it reconnects.
func (a *Agent) Revoke(ctx context.Context) error {
	conn, err := a.getConnection(ctx)
	if err != nil {
		return err
	}
	if conn == nil {
		return errors.New("not connected: no CompassConnection")
	}
	creds, _, err := loadCredentials(ctx, a.core, a.certSecret, a.caSecret)
	if err != nil {
		return err
	}
	cctx, cancel := a.bounded(ctx)
	defer cancel()
	return a.connector.RevokeCertificate(cctx, conn.Spec.ManagementInfo.ConnectorURL, creds)
}

func (a *Agent) getConnection(ctx context.Context) (*CompassConnection, error) {
	u, err := a.dyn.Resource(CompassConnectionGVR).Get(ctx, a.cfg.ConnectionName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading CompassConnection %s: %w", a.cfg.ConnectionName, err)
	}
	var c CompassConnection
	if err := fromUnstructured(u, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// saveConnection writes spec.managementInfo, the annotations and the status of conn to the
// CompassConnection (one write: its CRD has no status subresource), always against the object
// as it is now: a user's edit in the meantime (resyncNow) is kept and the write retried, and a
// CompassConnection deleted in the meantime is created again.
func (a *Agent) saveConnection(ctx context.Context, conn *CompassConnection, st CompassConnectionStatus) (*CompassConnection, error) {
	client := a.dyn.Resource(CompassConnectionGVR)
	var saved CompassConnection
	retriable := func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
	}
	err := retry.OnError(retry.DefaultBackoff, retriable, func() error {
		cur, err := a.getConnection(ctx)
		if err != nil {
			return err
		}
		want := CompassConnection{ObjectMeta: metav1.ObjectMeta{Name: conn.Name}}
		if cur != nil {
			want.ObjectMeta, want.Spec = *cur.ObjectMeta.DeepCopy(), cur.Spec
			want.ManagedFields = nil // the server keeps them
		}
		want.Spec.ManagementInfo = conn.Spec.ManagementInfo
		for k, v := range conn.Annotations {
			if want.Annotations == nil {
				want.Annotations = map[string]string{}
			}
			want.Annotations[k] = v
		}
		want.Status = complete(st)
		u, err := toUnstructured(&want, CompassConnectionGVR, "CompassConnection")
		if err != nil {
			return err
		}
		if cur == nil {
			u, err = client.Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
		} else {
			u, err = client.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if err != nil {
			return err
		}
		return fromUnstructured(u, &saved)
	})
	if err != nil {
		return nil, fmt.Errorf("saving CompassConnection %s: %w", conn.Name, err)
	}
	return &saved, nil
}

// complete fills in what the CompassConnection CRD requires of a status: connectionStatus (with
// its certificateStatus) even before the first connection.
func complete(st CompassConnectionStatus) CompassConnectionStatus {
	if st.ConnectionStatus == nil {
		st.ConnectionStatus = &ConnectionStatus{}
	}
	return st
}

// writeStatus replaces the status with a plain update of the CompassConnection (its CRD has no
// status subresource), re-reading on conflicts (spec edits by users).
func (a *Agent) writeStatus(ctx context.Context, name string, st CompassConnectionStatus) error {
	client := a.dyn.Resource(CompassConnectionGVR)
	st = complete(st)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s, err := toUnstructured(&st, CompassConnectionGVR, "CompassConnection")
		if err != nil {
			return err
		}
		delete(s.Object, "apiVersion")
		delete(s.Object, "kind")
		u.Object["status"] = s.Object
		_, err = client.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the status of CompassConnection %s: %w", name, err)
	}
	return nil
}

func (a *Agent) clearSpecFlags(ctx context.Context, name string) error {
	client := a.dyn.Resource(CompassConnectionGVR)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		spec, _ := u.Object["spec"].(map[string]any)
		delete(spec, "refreshCredentialsNow")
		delete(spec, "resyncNow")
		_, err = client.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
}
