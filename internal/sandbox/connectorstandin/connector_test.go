package connectorstandin_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/connectorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
)

const tenant = "tenant-a"

// keyBits is the smallest key the stand-in signs: 4096-bit keys would only slow the tests.
const keyBits = connectorstandin.MinKeyBits

type gqlResult struct {
	code   int
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func (r gqlResult) kind() string {
	if len(r.Errors) == 0 {
		return ""
	}
	k, _ := r.Errors[0].Extensions["error"].(string)
	return k
}

// post sends a GraphQL request with client, adding the headers.
func post(t *testing.T, client *http.Client, target, query string, header map[string]string) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query})
	require.NoError(t, err)
	req := sandboxtest.APIRequest(t, http.MethodPost, target, "", string(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := gqlResult{code: resp.StatusCode}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	return r
}

const configurationQuery = `query { result: configuration { token { token } certificateSigningRequestInfo { subject keyAlgorithm } managementPlaneInfo { directorURL certificateSecuredConnectorURL } } }`

type configuration struct {
	Result struct {
		Token *struct {
			Token string `json:"token"`
		} `json:"token"`
		CSRInfo struct {
			Subject      string `json:"subject"`
			KeyAlgorithm string `json:"keyAlgorithm"`
		} `json:"certificateSigningRequestInfo"`
		Info struct {
			DirectorURL  string `json:"directorURL"`
			ConnectorURL string `json:"certificateSecuredConnectorURL"`
		} `json:"managementPlaneInfo"`
	} `json:"result"`
}

type certificates struct {
	Result struct {
		Chain  string `json:"certificateChain"`
		CA     string `json:"caCertificate"`
		Client string `json:"clientCertificate"`
	} `json:"result"`
}

func decode[T any](t *testing.T, r gqlResult) T {
	t.Helper()
	require.Equal(t, http.StatusOK, r.code, "%+v", r)
	require.Empty(t, r.Errors)
	var out T
	require.NoError(t, json.Unmarshal(r.Data, &out))
	return out
}

// csr is a CSR for subject ("O=..,CN=..") in base64 of PEM, with its key, made as the Runtime
// Agent makes it.
func csr(t *testing.T, subject string) (string, *rsa.PrivateKey) {
	t.Helper()
	key, err := connector.NewKey(keyBits)
	require.NoError(t, err)
	request, err := connector.NewCSR(subject, key)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(request), key
}

func signMutation(csr string) string {
	return `mutation { result: signCertificateSigningRequest(csr: "` + csr + `") { certificateChain caCertificate clientCertificate } }`
}

type env struct {
	t         *testing.T
	sb        *standins.Listeners
	clock     *sandboxtest.Clock
	anonymous *http.Client
}

func newEnv(t *testing.T, store durable.Store) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Now().UTC().Truncate(time.Second))
	return &env{t: t, clock: clock, sb: sandboxtest.ServeTLS(t, standins.Options{Now: clock.Now, Store: store})}
}

func (e *env) client(cert *tls.Certificate) *http.Client {
	return sandboxtest.TLSClient(e.sb.CAPool(), cert)
}

// connected is a runtime that went through the token-secured flow.
type connected struct {
	runtimeID string
	cert      tls.Certificate
	leaf      *x509.Certificate
	config    configuration
}

// connect registers a runtime and connects it as the Runtime Agent does.
func (e *env) connect(name string) connected {
	t := e.t
	t.Helper()
	id, token, connectorURL := sandboxtest.OneTimeToken(t, e.sb.URL, tenant, name)
	require.Equal(t, e.sb.ConnectorURL(), connectorURL)
	cfg := decode[configuration](t, post(t, e.client(nil), connectorURL, configurationQuery, map[string]string{connectorstandin.TokenHeader: token}))
	require.NotNil(t, cfg.Result.Token)
	request, key := csr(t, cfg.Result.CSRInfo.Subject)
	certs := decode[certificates](t, post(t, e.client(nil), connectorURL, signMutation(request), map[string]string{connectorstandin.TokenHeader: cfg.Result.Token.Token}))
	return connected{runtimeID: id, config: cfg, cert: e.keyPair(certs, key)}.withLeaf(t)
}

func (c connected) withLeaf(t *testing.T) connected {
	leaf, err := x509.ParseCertificate(c.cert.Certificate[0])
	require.NoError(t, err)
	c.leaf = leaf
	return c
}

// keyPairPEM is the certificate chain and key (PEM) as a TLS certificate.
func (e *env) keyPairPEM(chain, keyPEM []byte) tls.Certificate {
	pair, err := tls.X509KeyPair(chain, keyPEM)
	require.NoError(e.t, err)
	return pair
}

func (e *env) keyPair(certs certificates, key *rsa.PrivateKey) tls.Certificate {
	chain, err := base64.StdEncoding.DecodeString(certs.Result.Chain)
	require.NoError(e.t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pair, err := tls.X509KeyPair(chain, keyPEM)
	require.NoError(e.t, err)
	return pair
}

func TestConnectFromATokenAndRenew(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect("rt")

	info := c.config.Result
	assert.Equal(t, connectorstandin.Subject(c.runtimeID), info.CSRInfo.Subject)
	assert.True(t, strings.HasSuffix(info.CSRInfo.Subject, ",CN="+c.runtimeID))
	assert.Equal(t, "rsa4096", info.CSRInfo.KeyAlgorithm)
	assert.Equal(t, standins.DirectorURL(e.sb.TLSURL), info.Info.DirectorURL)
	assert.Equal(t, standins.CertificateSecuredConnectorURL(e.sb.TLSURL), info.Info.ConnectorURL)
	assert.Equal(t, c.runtimeID, c.leaf.Subject.CommonName)
	assert.Equal(t, connectorstandin.DefaultCertificateLifetime, c.leaf.NotAfter.Sub(c.leaf.NotBefore))
	_, err := c.leaf.Verify(x509.VerifyOptions{Roots: e.sb.CAPool(), CurrentTime: e.clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "the CA served at /_sandbox/connector/ca.pem signed the certificate")
	code, caPEM := sandboxtest.Do(t, sandboxtest.Request(t, http.MethodGet, e.sb.URL+"/_sandbox/connector/ca.pem", ""))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, string(e.sb.CAPEM()), caPEM)

	// certificate-secured: configuration without a token, then a renewal with the same subject
	mtls := e.client(&c.cert)
	cfg := decode[configuration](t, post(t, mtls, info.Info.ConnectorURL, configurationQuery, nil))
	assert.Nil(t, cfg.Result.Token)
	assert.Equal(t, info.CSRInfo, cfg.Result.CSRInfo)
	request, key := csr(t, cfg.Result.CSRInfo.Subject)
	e.clock.Advance(time.Hour)
	renewed := connected{runtimeID: c.runtimeID, cert: e.keyPair(decode[certificates](t, post(t, mtls, info.Info.ConnectorURL, signMutation(request), nil)), key)}.withLeaf(t)
	assert.NotEqual(t, c.leaf.SerialNumber, renewed.leaf.SerialNumber)
	assert.Equal(t, c.leaf.NotBefore.Add(time.Hour), renewed.leaf.NotBefore)
	// both certificates work
	for _, cert := range []tls.Certificate{c.cert, renewed.cert} {
		decode[configuration](t, post(t, e.client(&cert), info.Info.ConnectorURL, configurationQuery, nil))
	}
	certs := e.sb.Connector.Snapshot().Certificates
	require.Len(t, certs, 2)
	assert.Equal(t, certs[0].Serial, certs[1].RenewalOf)
	assert.Equal(t, tenant, certs[1].Tenant)

	// a CSR with another subject is not renewed either
	other, _ := csr(t, connectorstandin.Subject("someone-else"))
	r := post(t, mtls, info.Info.ConnectorURL, signMutation(other), nil)
	assert.Equal(t, "InvalidData", r.kind())
}

func TestTokenReuseAndExpiredTokensAreRefused(t *testing.T) {
	e := newEnv(t, nil)
	_, token, url := sandboxtest.OneTimeToken(t, e.sb.URL, tenant, "rt")
	first := decode[configuration](t, post(t, e.client(nil), url, configurationQuery, map[string]string{connectorstandin.TokenHeader: token}))

	again := post(t, e.client(nil), url, configurationQuery, map[string]string{connectorstandin.TokenHeader: token})
	assert.Equal(t, http.StatusForbidden, again.code, "a used token")
	assert.Equal(t, "Unauthorized", again.kind())
	request, _ := csr(t, first.Result.CSRInfo.Subject)
	assert.Equal(t, http.StatusForbidden, post(t, e.client(nil), url, signMutation(request), map[string]string{connectorstandin.TokenHeader: token}).code)
	assert.Equal(t, http.StatusForbidden, post(t, e.client(nil), url, configurationQuery, map[string]string{connectorstandin.TokenHeader: "made-up"}).code)
	assert.Equal(t, http.StatusForbidden, post(t, e.client(nil), url, configurationQuery, nil).code, "no token")

	// the token configuration handed out expires 5 minutes after it was issued
	e.clock.Advance(directorstandin.OneTimeTokenTTL)
	expired := post(t, e.client(nil), url, signMutation(request), map[string]string{connectorstandin.TokenHeader: first.Result.Token.Token})
	assert.Equal(t, http.StatusForbidden, expired.code)
	assert.Contains(t, expired.Errors[0].Message, "expired")
	assert.Empty(t, e.sb.Connector.Snapshot().Certificates)

	_, fresh, _ := sandboxtest.OneTimeToken(t, e.sb.URL, tenant, "rt-2")
	e.clock.Advance(directorstandin.OneTimeTokenTTL - time.Second)
	decode[configuration](t, post(t, e.client(nil), url, configurationQuery, map[string]string{connectorstandin.TokenHeader: fresh}))
}

func TestACSRWithAnotherSubjectIsRefusedAndTheTokenKept(t *testing.T) {
	e := newEnv(t, nil)
	_, token, url := sandboxtest.OneTimeToken(t, e.sb.URL, tenant, "rt")
	cfg := decode[configuration](t, post(t, e.client(nil), url, configurationQuery, map[string]string{connectorstandin.TokenHeader: token}))
	header := map[string]string{connectorstandin.TokenHeader: cfg.Result.Token.Token}
	subject := cfg.Result.CSRInfo.Subject
	for name, wrong := range map[string]string{
		"another runtime":     connectorstandin.SubjectPrefix + "CN=another-runtime",
		"another org":         strings.Replace(subject, "O=Kyma", "O=Evil", 1),
		"a missing attribute": strings.Replace(subject, "L=Waldorf,", "", 1),
	} {
		request, _ := csr(t, wrong)
		r := post(t, e.client(nil), url, signMutation(request), header)
		assert.Equal(t, http.StatusOK, r.code, name)
		assert.Equal(t, "InvalidData", r.kind(), name)
	}
	r := post(t, e.client(nil), url, signMutation(base64.StdEncoding.EncodeToString([]byte("not a csr"))), header)
	assert.Equal(t, "InvalidData", r.kind())
	assert.Empty(t, e.sb.Connector.Snapshot().Certificates)

	request, _ := csr(t, subject)
	decode[certificates](t, post(t, e.client(nil), url, signMutation(request), header))
	assert.Len(t, e.sb.Connector.Snapshot().Certificates, 1)
}

// foreignCertificate is a client certificate for cn from a CA of its own.
func foreignCertificate(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, keyBits)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
}

func TestTheCertificateSecuredEndpointRefusesOtherCertificates(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect("rt")
	url := c.config.Result.Info.ConnectorURL

	// a client that sends it anyway fails the handshake
	foreign := foreignCertificate(t, c.runtimeID)
	insist := e.client(nil)
	insist.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &foreign, nil
	}
	for _, target := range []string{url, c.config.Result.Info.DirectorURL} {
		_, err := insist.Post(target, "application/json", strings.NewReader(`{"query":"{ configuration { token { token } } }"}`))
		require.Error(t, err, "the TLS listener refuses a certificate of another CA")
	}
	// Go's client does not send a certificate the server's CA did not issue
	r := post(t, e.client(&foreign), url, configurationQuery, nil)
	assert.Equal(t, http.StatusUnauthorized, r.code)

	r = post(t, e.client(nil), url, configurationQuery, nil)
	assert.Equal(t, http.StatusUnauthorized, r.code, "no certificate")
	assert.Equal(t, "Unauthorized", r.kind())

	// plain HTTP reaches neither endpoint
	plain := strings.Replace(url, e.sb.TLSURL, e.sb.URL, 1)
	assert.Equal(t, http.StatusUnauthorized, post(t, http.DefaultClient, plain, configurationQuery, nil).code)
	_, token, _ := sandboxtest.OneTimeToken(t, e.sb.URL, tenant, "rt-2")
	r = post(t, http.DefaultClient, e.sb.URL+"/connector/graphql", configurationQuery, map[string]string{connectorstandin.TokenHeader: token})
	assert.Equal(t, http.StatusForbidden, r.code)
	assert.Contains(t, r.Errors[0].Message, "TLS only")

	// a certificate the CA issued that the Connector does not know (forgotten by a reset)
	require.NoError(t, e.sb.Connector.Reset(context.Background()))
	assert.Equal(t, http.StatusForbidden, post(t, e.client(&c.cert), url, configurationQuery, nil).code)
}

func TestARevokedCertificateIsNotRenewed(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect("rt")
	url := c.config.Result.Info.ConnectorURL
	mtls := e.client(&c.cert)

	r := post(t, e.client(nil), e.sb.ConnectorURL(), `mutation { result: revokeCertificate }`, map[string]string{connectorstandin.TokenHeader: "x"})
	assert.Equal(t, http.StatusForbidden, r.code, "revocation needs the certificate")

	var revoked struct {
		Result bool `json:"result"`
	}
	revoked = decode[struct {
		Result bool `json:"result"`
	}](t, post(t, mtls, url, `mutation { result: revokeCertificate }`, nil))
	assert.True(t, revoked.Result)
	require.NotNil(t, e.sb.Connector.Snapshot().Certificates[0].RevokedAt)

	request, _ := csr(t, c.config.Result.CSRInfo.Subject)
	r = post(t, mtls, url, signMutation(request), nil)
	assert.Equal(t, http.StatusForbidden, r.code)
	assert.Contains(t, r.Errors[0].Message, "revoked")
	assert.Len(t, e.sb.Connector.Snapshot().Certificates, 1, "nothing was issued")

	// it stays valid for TLS: the Director still answers the runtime
	d := post(t, mtls, c.config.Result.Info.DirectorURL, `query { result: applicationsForRuntime(runtimeID: "`+c.runtimeID+`") { totalCount } }`,
		map[string]string{"Tenant": tenant})
	assert.Equal(t, http.StatusOK, d.code)
	assert.Empty(t, d.Errors)
}

func TestTheCertificateLifetimeCanBeShortened(t *testing.T) {
	e := newEnv(t, nil)
	sandboxtest.SetCertificateLifetime(t, e.sb.URL, 5*time.Second)
	c := e.connect("rt")
	assert.Equal(t, 5*time.Second, c.leaf.NotAfter.Sub(c.leaf.NotBefore))
	assert.Equal(t, "5s", e.sb.Connector.Snapshot().CertificateLifetime)

	for _, bad := range []string{`{"lifetime":"1ms"}`, `{"lifetime":"-1s"}`, `{"lifetime":"soon"}`, `nope`} {
		code, _ := sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodPut, e.sb.URL+"/_sandbox/connector/certificate-lifetime", "", bad))
		assert.Equal(t, http.StatusBadRequest, code, bad)
	}
	code, body := sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodPut, e.sb.URL+"/_sandbox/connector/certificate-lifetime", "", `{"lifetime":"0s"}`))
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"lifetime":"2160h0m0s"}`, body)
}

func TestStateSurvivesARestart(t *testing.T) {
	log := logrus.New()
	log.SetOutput(discard{})
	store, err := durablesql.OpenFile(context.Background(), filepath.Join(t.TempDir(), "sandbox.db"), log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })

	e := newEnv(t, store)
	sandboxtest.SetCertificateLifetime(t, e.sb.URL, time.Hour)
	kept, gone := e.connect("kept"), e.connect("gone")
	decode[struct {
		Result bool `json:"result"`
	}](t, post(t, e.client(&gone.cert), gone.config.Result.Info.ConnectorURL, `mutation { result: revokeCertificate }`, nil))
	_, unused, _ := sandboxtest.OneTimeToken(t, e.sb.URL, tenant, "later")
	before := e.sb.Connector.Snapshot()
	caPEM := e.sb.CAPEM()

	// a new sandbox on the same database, as after kill -9
	e2 := &env{t: t, clock: e.clock, sb: sandboxtest.ServeTLS(t, standins.Options{Now: e.clock.Now, Store: store})}
	assert.Equal(t, before, e2.sb.Connector.Snapshot())
	assert.Equal(t, caPEM, e2.sb.CAPEM(), "the CA is kept")
	url := standins.CertificateSecuredConnectorURL(e2.sb.TLSURL)
	decode[configuration](t, post(t, e2.client(&kept.cert), url, configurationQuery, nil))
	assert.Equal(t, http.StatusForbidden, post(t, e2.client(&gone.cert), url, configurationQuery, nil).code, "still revoked")
	cfg := decode[configuration](t, post(t, e2.client(nil), e2.sb.ConnectorURL(), configurationQuery, map[string]string{connectorstandin.TokenHeader: unused}))
	assert.Equal(t, standins.CertificateSecuredConnectorURL(e2.sb.TLSURL), cfg.Result.Info.ConnectorURL)

	// a reset forgets the certificates but keeps the CA
	require.NoError(t, e2.sb.Sandbox.Reset(context.Background()))
	e3 := sandboxtest.ServeTLS(t, standins.Options{Now: e.clock.Now, Store: store})
	assert.Equal(t, connectorstandin.Objects{CertificateLifetime: connectorstandin.DefaultCertificateLifetime.String(), Certificates: []connectorstandin.Certificate{},
		Calls: map[string]int{}}, e3.Connector.Snapshot())
	assert.Equal(t, caPEM, e3.CAPEM())
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
