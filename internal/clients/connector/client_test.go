package connector_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
)

// keyBits keeps the tests fast; the Connector asks for 4096 and signs 2048 and more.
const keyBits = 2048

const tenant = "tenant-a"

// fastCalls retry quickly, so that the tests of transient failures take no time.
var fastCalls = clientkit.Calls{Attempts: 3, Timeout: 5 * time.Second, BreakerThreshold: -1}

// caFile writes the sandbox CA to a file, as APP_CONNECTOR_CA_FILE names it.
func caFile(t *testing.T, sb *standins.Listeners) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(path, sb.CAPEM(), 0o600))
	return path
}

// connected is a runtime connected with the client, as the Runtime Agent does it.
type connected struct {
	runtimeID string
	cfg       connector.Configuration
	certs     connector.Certificates
	mtls      *connector.Client
}

func connect(t *testing.T, sb *standins.Listeners, name string) connected {
	t.Helper()
	ctx := sandboxtest.Context(t, time.Minute)
	roots, err := connector.LoadRoots(caFile(t, sb))
	require.NoError(t, err)
	c := connector.New(connector.Options{Roots: roots})
	id, token, url := sandboxtest.OneTimeToken(t, sb.URL, tenant, name)

	cfg, err := c.Configuration(ctx, url, token)
	require.NoError(t, err)
	assert.Equal(t, "rsa4096", cfg.KeyAlgorithm)
	assert.NotEmpty(t, cfg.Token)
	assert.Equal(t, standins.DirectorURL(sb.TLSURL), cfg.DirectorURL)
	subject, err := connector.ParseSubject(cfg.Subject)
	require.NoError(t, err)
	assert.Equal(t, id, subject.CommonName)

	key, err := connector.NewKey(keyBits)
	require.NoError(t, err)
	csr, err := connector.NewCSR(cfg.Subject, key)
	require.NoError(t, err)
	certs, err := c.SignCSR(ctx, url, cfg.Token, csr)
	require.NoError(t, err)
	pair, err := connector.KeyPair(certs.Chain, connector.KeyPEM(key))
	require.NoError(t, err)
	// from now on the runtime trusts the CA the Connector gave it
	pool, err := connector.Pool(certs.CA)
	require.NoError(t, err)
	mtls := connector.New(connector.Options{Roots: pool, Certificate: &pair, Calls: fastCalls, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	return connected{runtimeID: id, cfg: cfg, certs: certs, mtls: mtls}
}

func leaf(t *testing.T, pemCert []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemCert)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func TestConnectRenewAndRevoke(t *testing.T) {
	sb := sandboxtest.ServeTLS(t, standins.Options{})
	sandboxtest.SetCertificateLifetime(t, sb.URL, time.Hour)
	ctx := sandboxtest.Context(t, time.Minute)
	c := connect(t, sb, "rt")
	first := leaf(t, c.certs.Client)
	assert.Equal(t, c.runtimeID, first.Subject.CommonName)
	assert.Equal(t, time.Hour, first.NotAfter.Sub(first.NotBefore))
	assert.Equal(t, sb.CAPEM(), c.certs.CA)

	cfg, err := c.mtls.CertificateConfiguration(ctx, c.cfg.CertificateSecuredConnectorURL)
	require.NoError(t, err)
	assert.Empty(t, cfg.Token)
	assert.Equal(t, c.cfg.Subject, cfg.Subject)

	key, err := connector.NewKey(keyBits)
	require.NoError(t, err)
	csr, err := connector.NewCSR(cfg.Subject, key)
	require.NoError(t, err)
	renewed, err := c.mtls.RenewCertificate(ctx, cfg.CertificateSecuredConnectorURL, csr)
	require.NoError(t, err)
	assert.NotEqual(t, first.SerialNumber, leaf(t, renewed.Client).SerialNumber)

	require.NoError(t, c.mtls.RevokeCertificate(ctx, cfg.CertificateSecuredConnectorURL))
	_, err = c.mtls.RenewCertificate(ctx, cfg.CertificateSecuredConnectorURL, csr)
	require.Error(t, err)
	assert.True(t, connector.IsRefused(err), "%v", err)
	assert.False(t, connector.IsTemporary(err))
	var e *connector.Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, 1, e.Attempts, "a refusal is not retried")
}

func TestRefusalsArePermanent(t *testing.T) {
	sb := sandboxtest.ServeTLS(t, standins.Options{})
	ctx := sandboxtest.Context(t, time.Minute)
	roots, err := connector.LoadRoots(caFile(t, sb))
	require.NoError(t, err)
	c := connector.New(connector.Options{Roots: roots})
	id, token, url := sandboxtest.OneTimeToken(t, sb.URL, tenant, "rt")
	cfg, err := c.Configuration(ctx, url, token)
	require.NoError(t, err)

	_, err = c.Configuration(ctx, url, token)
	assert.True(t, connector.IsRefused(err), "a used token: %v", err)
	require.ErrorIs(t, err, connector.ErrUnauthorized)
	assert.Equal(t, 403, clientkit.StatusOf(err))

	key, err := connector.NewKey(keyBits)
	require.NoError(t, err)
	wrong, err := connector.NewCSR(strings.Replace(cfg.Subject, "CN="+id, "CN=another-runtime", 1), key)
	require.NoError(t, err)
	_, err = c.SignCSR(ctx, url, cfg.Token, wrong)
	assert.True(t, connector.IsRefused(err), "another subject: %v", err)
	require.ErrorIs(t, err, connector.ErrInvalidCSR)

	// without the sandbox CA the server is not trusted
	_, err = connector.New(connector.Options{}).Configuration(ctx, url, cfg.Token)
	require.Error(t, err)
	assert.False(t, connector.IsRefused(err))

	// no certificate on the certificate-secured endpoint
	_, err = c.CertificateConfiguration(ctx, cfg.CertificateSecuredConnectorURL)
	assert.True(t, connector.IsRefused(err), "%v", err)

	_, err = c.Configuration(ctx, url, "")
	require.Error(t, err)
}

func TestTransientFailures(t *testing.T) {
	sb := sandboxtest.ServeTLS(t, standins.Options{})
	ctx := sandboxtest.Context(t, time.Minute)
	c := connect(t, sb, "rt")
	_, token, url := sandboxtest.OneTimeToken(t, sb.URL, tenant, "rt-2")
	require.NoError(t, sb.Sandbox.SetFaults("connector", sandbox.Faults{ErrorRate: 1}))

	_, err := c.mtls.CertificateConfiguration(ctx, c.cfg.CertificateSecuredConnectorURL)
	require.Error(t, err)
	assert.True(t, connector.IsTemporary(err), "%v", err)
	var e *connector.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, fastCalls.Attempts, e.Attempts, "the certificate-secured calls are retried")

	roots, err := connector.LoadRoots(caFile(t, sb))
	require.NoError(t, err)
	_, err = connector.New(connector.Options{Roots: roots, Calls: fastCalls}).Configuration(ctx, url, token)
	require.ErrorAs(t, err, &e)
	assert.True(t, e.Temporary)
	assert.Equal(t, 1, e.Attempts, "a token-secured call is made once")

	require.NoError(t, sb.Sandbox.SetFaults("connector", sandbox.Faults{}))
	_, err = c.mtls.CertificateConfiguration(ctx, c.cfg.CertificateSecuredConnectorURL)
	require.NoError(t, err)
}

func TestParseSubject(t *testing.T) {
	n, err := connector.ParseSubject("O=Org,OU=Unit,L=City,ST=State,C=DE,CN=rt-1")
	require.NoError(t, err)
	assert.Equal(t, "rt-1", n.CommonName)
	assert.Equal(t, []string{"Org"}, n.Organization)
	for _, bad := range []string{"", "O=Org", "CN=a,CN=b", "X=1,CN=a", "CN"} {
		_, err := connector.ParseSubject(bad)
		assert.Error(t, err, bad)
	}
	roots, err := connector.LoadRoots("")
	require.NoError(t, err)
	assert.Nil(t, roots, "the system roots")
	_, err = connector.LoadRoots(filepath.Join(t.TempDir(), "missing.pem"))
	assert.Error(t, err)
}
