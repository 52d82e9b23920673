package runtimeagent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
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
	failures                           int // consecutive failed connection attempts
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
}

// NewAgent checks cfg and returns the agent.
func NewAgent(cfg Config, d Deps) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, core: d.Core, dyn: d.Dynamic, connector: d.Connector, director: d.Director, log: d.Log, now: d.Now}
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

func (a *Agent) stamp() *metav1.Time {
	t := metav1.NewTime(a.now().UTC().Truncate(time.Second))
	return &t
}

// Reconcile makes one pass and returns when the next one is due.
func (a *Agent) Reconcile(ctx context.Context) time.Duration {
	conn, err := a.getConnection(ctx)
	if err != nil {
		a.log.WithError(err).Error("reading the CompassConnection")
		return a.cfg.ReconnectBackoffMin
	}
	var creds ClientCredentials
	var cert *x509.Certificate
	lost := ""
	switch {
	case conn == nil:
		lost = "no CompassConnection"
	case conn.Status.State == ConnectionFailed:
		lost = "the connection failed"
	default:
		if creds, err = loadCredentials(ctx, a.core, a.certSecret, a.caSecret); err == nil {
			cert, err = creds.ClientCertificate()
		}
		switch {
		case err != nil:
			lost = err.Error()
		case !a.now().Before(cert.NotAfter):
			lost = fmt.Sprintf("the client certificate expired at %s", cert.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if lost != "" {
		a.log.WithField("reason", lost).Info("connecting to Compass with the one-time token")
		if conn, creds, err = a.connect(ctx, conn); err != nil {
			a.failures++
			wait := a.backoff()
			a.log.WithError(err).WithField("retryIn", wait).Warn("connecting to Compass failed")
			return wait
		}
		a.failures = 0
		if cert, err = creds.ClientCertificate(); err != nil {
			a.log.WithError(err).Error("reading the new client certificate")
			return a.cfg.ReconnectBackoffMin
		}
		a.log.WithField("notAfter", cert.NotAfter).Info("connected to Compass")
	}

	st := conn.Status
	if st.ConnectionStatus == nil {
		st.ConnectionStatus = &ConnectionStatus{}
	}
	if creds, cert, err = a.maintain(ctx, conn, creds, cert, &st); err != nil {
		st.State, st.ConnectionStatus.Error = ConnectionMaintenanceFailed, err.Error()
		a.log.WithError(err).Warn("maintaining the connection failed")
	} else {
		st.ConnectionStatus.Error = ""
		if a.syncDue(conn) {
			a.synchronize(ctx, conn, creds, &st)
		} else if st.State == ConnectionMaintenanceFailed {
			st.State = Connected
		}
	}
	if err := a.writeStatus(ctx, conn.Name, st); err != nil {
		a.log.WithError(err).Error("writing the CompassConnection status")
		return a.cfg.ReconnectBackoffMin
	}
	return a.nextPass(cert)
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

func (a *Agent) backoff() time.Duration {
	d := a.cfg.ReconnectBackoffMin
	for i := 1; i < a.failures && d < a.cfg.ReconnectBackoffMax; i++ {
		d *= 2
	}
	return min(d, a.cfg.ReconnectBackoffMax)
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
// secure connection" tutorial) and records it in the CompassConnection; on failure the
// CompassConnection says ConnectionFailed and why.
func (a *Agent) connect(ctx context.Context, conn *CompassConnection) (*CompassConnection, ClientCredentials, error) {
	if conn == nil {
		conn = &CompassConnection{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.ConnectionName}}
	}
	agentCfg, creds, info, err := a.establish(ctx)
	if err != nil {
		if conn.Spec.ManagementInfo.ConnectorURL == "" {
			conn.Spec.ManagementInfo.ConnectorURL = agentCfg.ConnectorURL
		}
		st := conn.Status
		st.State = ConnectionFailed
		if st.ConnectionStatus == nil {
			st.ConnectionStatus = &ConnectionStatus{}
		}
		st.ConnectionStatus.Error = err.Error()
		if _, werr := a.saveConnection(ctx, conn, st); werr != nil {
			err = errors.Join(err, werr)
		}
		return nil, ClientCredentials{}, err
	}
	cert, err := creds.ClientCertificate()
	if err != nil {
		return nil, ClientCredentials{}, err
	}
	now := a.stamp()
	conn.Spec.ManagementInfo = ManagementInfo{ConnectorURL: info.CertificateSecuredConnectorURL, DirectorURL: info.DirectorURL}
	if conn.Annotations == nil {
		conn.Annotations = map[string]string{}
	}
	conn.Annotations[annotationRuntimeID], conn.Annotations[annotationTenant] = agentCfg.RuntimeID, agentCfg.Tenant
	st := CompassConnectionStatus{
		State: Connected,
		ConnectionStatus: &ConnectionStatus{
			CertificateStatus: certificateStatus(now, cert),
			Established:       now, LastSuccess: now, LastSync: now,
		},
		SynchronizationStatus: conn.Status.SynchronizationStatus,
	}
	saved, err := a.saveConnection(ctx, conn, st)
	if err != nil {
		return nil, ClientCredentials{}, err
	}
	return saved, creds, nil
}

// establish exchanges the one-time token for a client certificate and stores it.
func (a *Agent) establish(ctx context.Context) (AgentConfiguration, ClientCredentials, connector.Configuration, error) {
	agentCfg, err := readAgentConfiguration(ctx, a.core, a.configSecret)
	if err != nil {
		return agentCfg, ClientCredentials{}, connector.Configuration{}, err
	}
	cctx, cancel := a.bounded(ctx)
	defer cancel()
	info, err := a.connector.Configuration(cctx, agentCfg.ConnectorURL, agentCfg.Token)
	if err != nil {
		return agentCfg, ClientCredentials{}, info, err
	}
	creds, err := a.newCertificate(ctx, info.Subject, func(ctx context.Context, csr []byte) (connector.Certificates, error) {
		return a.connector.SignCSR(ctx, agentCfg.ConnectorURL, info.Token, csr)
	})
	if err != nil {
		return agentCfg, creds, info, err
	}
	return agentCfg, creds, info, nil
}

// newCertificate makes a key and CSR for subject, has sign sign it and stores the result.
func (a *Agent) newCertificate(ctx context.Context, subject string, sign func(context.Context, []byte) (connector.Certificates, error)) (ClientCredentials, error) {
	keyPEM, csrPEM, err := newKeyAndCSR(ctx, subject, a.cfg.CertKeyBits)
	if err != nil {
		return ClientCredentials{}, err
	}
	cctx, cancel := a.bounded(ctx)
	defer cancel()
	set, err := sign(cctx, csrPEM)
	if err != nil {
		return ClientCredentials{}, err
	}
	creds := ClientCredentials{CertificateChain: set.Chain, PrivateKey: keyPEM, CACertificate: set.CA}
	// Refuse what does not work before replacing what does.
	if _, err := creds.TLSConfig(); err != nil {
		return ClientCredentials{}, fmt.Errorf("the Connector's certificates: %w", err)
	}
	if err := storeCredentials(ctx, a.core, a.certSecret, a.caSecret, creds); err != nil {
		return ClientCredentials{}, err
	}
	return creds, nil
}

// maintain checks the connection on the certificate-secured Connector and renews the
// certificate when less than the threshold of its lifetime remains (or when asked to).
func (a *Agent) maintain(ctx context.Context, conn *CompassConnection, creds ClientCredentials, cert *x509.Certificate, st *CompassConnectionStatus) (ClientCredentials, *x509.Certificate, error) {
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
	renewed, err := a.newCertificate(ctx, subject, func(ctx context.Context, csr []byte) (connector.Certificates, error) {
		return a.connector.RenewCertificate(ctx, url, creds, csr)
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
	creds, err := loadCredentials(ctx, a.core, a.certSecret, a.caSecret)
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

// saveConnection creates or updates the CompassConnection: spec, annotations and status in one
// write, as the CompassConnection CRD has no status subresource.
func (a *Agent) saveConnection(ctx context.Context, conn *CompassConnection, st CompassConnectionStatus) (*CompassConnection, error) {
	client := a.dyn.Resource(CompassConnectionGVR)
	want := *conn.ObjectMeta.DeepCopy()
	want.ManagedFields = nil // the server keeps them
	u, err := toUnstructured(&CompassConnection{ObjectMeta: want, Spec: conn.Spec, Status: complete(st)}, CompassConnectionGVR, "CompassConnection")
	if err != nil {
		return nil, err
	}
	if conn.ResourceVersion == "" {
		u, err = client.Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		u, err = client.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return nil, fmt.Errorf("saving CompassConnection %s: %w", conn.Name, err)
	}
	var saved CompassConnection
	if err := fromUnstructured(u, &saved); err != nil {
		return nil, err
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
