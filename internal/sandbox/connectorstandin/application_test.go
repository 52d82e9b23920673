package connectorstandin_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/connectorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
)

// openSSLSubject is the conversion of the Connector's subject ("O=..,OU=..,CN=..") to the form
// `openssl req -subj` takes ("/O=../OU=../CN=.."), as docs/user/runtime-agent.md writes it:
// "/${SUBJECT//,//}".
func openSSLSubject(subject string) string { return "/" + strings.ReplaceAll(subject, ",", "/") }

// Seed 003's first tutorial as written: requestOneTimeTokenForApplication in the Director,
// configuration with the token, the key and CSR made by openssl with the converted subject,
// signCertificateSigningRequest with the next token: a client certificate whose CN is the
// application's ID. The token is then spent.
func TestApplicationTokenTutorialWithOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is not installed (make test installs it: scripts/registry.sh install)")
	}
	e := newEnv(t, nil)
	app := sandboxtest.RegisterApplication(t, e.sb.URL, directorstandin.ApplicationInput{Tenant: tenant, Name: "orders"})
	var tok struct {
		Result struct {
			Token              string `json:"token"`
			ConnectorURL       string `json:"connectorURL"`
			LegacyConnectorURL string `json:"legacyConnectorURL"`
		} `json:"result"`
	}
	sandboxtest.DirectorGraphQL(t, e.sb.URL, tenant, `mutation($id: ID!) { result: requestOneTimeTokenForApplication(id: $id) { token connectorURL legacyConnectorURL } }`,
		map[string]any{"id": app.ID}, &tok)
	require.NotEmpty(t, tok.Result.Token)
	assert.Equal(t, e.sb.ConnectorURL(), tok.Result.ConnectorURL)

	cfg := decode[configuration](t, post(t, e.client(nil), tok.Result.ConnectorURL, configurationQuery, map[string]string{connectorstandin.TokenHeader: tok.Result.Token}))
	require.NotNil(t, cfg.Result.Token)
	assert.Equal(t, connectorstandin.Subject(app.ID), cfg.Result.CSRInfo.Subject)

	dir := t.TempDir()
	key, csrFile := filepath.Join(dir, "compass-app.key"), filepath.Join(dir, "compass-app.csr")
	run := func(args ...string) {
		out, err := exec.Command(openssl, args...).CombinedOutput()
		require.NoError(t, err, "openssl %v: %s", args, out)
	}
	run("genrsa", "-out", key, "2048")
	run("req", "-new", "-sha256", "-out", csrFile, "-key", key, "-subj", openSSLSubject(cfg.Result.CSRInfo.Subject))
	csrPEM, err := os.ReadFile(csrFile)
	require.NoError(t, err)
	certs := decode[certificates](t, post(t, e.client(nil), tok.Result.ConnectorURL, signMutation(base64.StdEncoding.EncodeToString(csrPEM)),
		map[string]string{connectorstandin.TokenHeader: cfg.Result.Token.Token}))
	chain, err := base64.StdEncoding.DecodeString(certs.Result.Chain)
	require.NoError(t, err)
	keyPEM, err := os.ReadFile(key)
	require.NoError(t, err)
	c := connected{cert: e.keyPairPEM(chain, keyPEM)}.withLeaf(t)
	assert.Equal(t, app.ID, c.leaf.Subject.CommonName)

	// The application's certificate works on the certificate-secured endpoint (maintain).
	again := decode[configuration](t, post(t, e.client(&c.cert), cfg.Result.Info.ConnectorURL, configurationQuery, nil))
	assert.Equal(t, connectorstandin.Subject(app.ID), again.Result.CSRInfo.Subject)
	// The first token is spent.
	r := post(t, e.client(nil), tok.Result.ConnectorURL, configurationQuery, map[string]string{connectorstandin.TokenHeader: tok.Result.Token})
	assert.Equal(t, 403, r.code)
}
