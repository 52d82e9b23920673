// Package connector is the client of the Compass Connector as the Runtime Agent uses it: the
// token-secured configuration query and CSR signing that establish a runtime's trust, and, with
// the client certificate it got, the certificate-secured configuration, renewal and revocation.
// Every call is GraphQL over HTTPS. A call on the token-secured endpoint is made once: the
// Connector uses up the one-time token, so only a new token can repeat it. A call on the
// certificate-secured endpoint is retried on transient failures (network errors, 429, 5xx,
// InternalError) within the call's budget (clientkit.Calls). Refusals (an invalid, used or
// expired token, an unknown or revoked certificate, a CSR with another subject) are permanent:
// IsRefused tells them apart from transient failures.
package connector

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// TokenHeader carries the one-time token to the token-secured endpoint.
const TokenHeader = "Connector-Token"

const (
	queryConfiguration = `query { result: configuration { token { token } certificateSigningRequestInfo { subject keyAlgorithm } managementPlaneInfo { directorURL certificateSecuredConnectorURL } } }`
	mutationSign       = `mutation($csr: String!) { result: signCertificateSigningRequest(csr: $csr) { certificateChain caCertificate clientCertificate } }`
	mutationRevoke     = `mutation { result: revokeCertificate }`
)

// Kinds of GraphQL errors, Compass's extensions.error.
const (
	KindUnauthorized  = "Unauthorized"
	KindInvalidData   = "InvalidData"
	KindInternalError = "InternalError"
)

// DefaultTimeout bounds one request.
const DefaultTimeout = 30 * time.Second

// Options configure a Client; the zero value trusts the system roots and presents no certificate.
type Options struct {
	// Roots are the CAs trusted for the Connector's server certificate; the system roots when nil.
	Roots *x509.CertPool
	// Certificate is presented to the certificate-secured endpoint.
	Certificate *tls.Certificate
	// Timeout bounds one request; DefaultTimeout when zero.
	Timeout time.Duration
	// Calls bound the certificate-secured calls, which are retried; InitialBackoff and
	// MaxBackoff pace the retries.
	Calls                      clientkit.Calls
	InitialBackoff, MaxBackoff time.Duration
}

// Client calls the Connector's endpoints. It is safe for concurrent use.
type Client struct {
	http   *http.Client
	once   *clientkit.Caller
	caller *clientkit.Caller
}

// New returns a client with opts.
func New(opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: opts.Roots, MinVersion: tls.VersionTLS12}
	if opts.Certificate != nil {
		tr.TLSClientConfig.Certificates = []tls.Certificate{*opts.Certificate}
	}
	once := opts.Calls
	once.Attempts = 1
	return &Client{
		http:   clientkit.NewHTTPClient(opts.Timeout, tr),
		once:   clientkit.NewCaller("connector", opts.InitialBackoff, opts.MaxBackoff, once, nil),
		caller: clientkit.NewCaller("connector", opts.InitialBackoff, opts.MaxBackoff, opts.Calls, nil),
	}
}

// LoadRoots reads a PEM bundle of CAs to trust (APP_CONNECTOR_CA_FILE); an empty path means the
// system roots (nil).
func LoadRoots(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the Connector's CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("the Connector's CA bundle %s holds no PEM certificate", path)
	}
	return pool, nil
}

// Configuration is the Connector's configuration answer.
type Configuration struct {
	// Token is the one-time token for the next token-secured call; empty from the
	// certificate-secured endpoint.
	Token string
	// Subject is the subject the CSR must have, e.g. "O=..,OU=..,L=..,ST=..,C=..,CN=<runtime ID>".
	Subject string
	// KeyAlgorithm is the key the Connector asks for, e.g. "rsa4096".
	KeyAlgorithm                   string
	DirectorURL                    string
	CertificateSecuredConnectorURL string
}

// Certificates are what the Connector signed, each in PEM.
type Certificates struct {
	// Chain is the client certificate followed by the CA.
	Chain  []byte
	CA     []byte
	Client []byte
}

// Error is returned by every Client method: what was being done, whether it is temporary, the
// HTTP status and the Connector's own error.
type Error = clientkit.Error

// ErrUnauthorized is in the chain of a refused token or certificate: an invalid, used or expired
// one-time token, a missing, unknown or revoked client certificate (HTTP 401/403 or the GraphQL
// error Unauthorized).
var ErrUnauthorized = errors.New("refused by the Connector")

// ErrInvalidCSR is in the chain of a CSR the Connector does not sign (InvalidData): another
// subject, a bad signature, an unsupported key.
var ErrInvalidCSR = errors.New("certificate signing request refused by the Connector")

// IsRefused tells whether the Connector refused the call for good (ErrUnauthorized or
// ErrInvalidCSR): only a new token, a new connection or another CSR helps.
func IsRefused(err error) bool {
	return errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrInvalidCSR)
}

// IsTemporary tells whether err may go away when the call is made again later.
func IsTemporary(err error) bool { return clientkit.IsTemporary(err) }

type wireConfiguration struct {
	Token *struct {
		Token string `json:"token"`
	} `json:"token"`
	CSRInfo *struct {
		Subject      string `json:"subject"`
		KeyAlgorithm string `json:"keyAlgorithm"`
	} `json:"certificateSigningRequestInfo"`
	Info *struct {
		DirectorURL  string `json:"directorURL"`
		ConnectorURL string `json:"certificateSecuredConnectorURL"`
	} `json:"managementPlaneInfo"`
}

type wireCertificates struct {
	Chain  string `json:"certificateChain"`
	CA     string `json:"caCertificate"`
	Client string `json:"clientCertificate"`
}

// Configuration asks the token-secured endpoint at url for the runtime's configuration, using up
// token; the answer carries the token for SignCSR.
func (c *Client) Configuration(ctx context.Context, url, token string) (Configuration, error) {
	if token == "" {
		return Configuration{}, &Error{Op: "fetching the configuration from the Connector", System: "connector", Err: errors.New("no one-time token")}
	}
	return c.configuration(ctx, c.once, url, token)
}

// CertificateConfiguration asks the certificate-secured endpoint at url for the configuration of
// the client certificate's runtime.
func (c *Client) CertificateConfiguration(ctx context.Context, url string) (Configuration, error) {
	return c.configuration(ctx, c.caller, url, "")
}

func (c *Client) configuration(ctx context.Context, caller *clientkit.Caller, url, token string) (Configuration, error) {
	var out struct {
		Result *wireConfiguration `json:"result"`
	}
	err := caller.Retry(ctx, "fetching the configuration from the Connector", func(ctx context.Context) error {
		return c.call(ctx, url, token, queryConfiguration, nil, &out)
	})
	if err != nil {
		return Configuration{}, err
	}
	r := out.Result
	if r == nil || r.CSRInfo == nil || r.Info == nil || r.CSRInfo.Subject == "" {
		return Configuration{}, &Error{Op: "fetching the configuration from the Connector", System: "connector", Attempts: 1,
			Err: errors.New("the answer has no CSR info or management plane info")}
	}
	cfg := Configuration{Subject: r.CSRInfo.Subject, KeyAlgorithm: r.CSRInfo.KeyAlgorithm, DirectorURL: r.Info.DirectorURL,
		CertificateSecuredConnectorURL: r.Info.ConnectorURL}
	if r.Token != nil {
		cfg.Token = r.Token.Token
	}
	return cfg, nil
}

// SignCSR has the token-secured endpoint at url sign csr (PEM), using up token.
func (c *Client) SignCSR(ctx context.Context, url, token string, csr []byte) (Certificates, error) {
	if token == "" {
		return Certificates{}, &Error{Op: "signing a CSR at the Connector", System: "connector", Err: errors.New("no one-time token")}
	}
	return c.sign(ctx, c.once, url, token, csr)
}

// RenewCertificate has the certificate-secured endpoint at url sign csr (PEM), which must have
// the subject of the client certificate.
func (c *Client) RenewCertificate(ctx context.Context, url string, csr []byte) (Certificates, error) {
	return c.sign(ctx, c.caller, url, "", csr)
}

func (c *Client) sign(ctx context.Context, caller *clientkit.Caller, url, token string, csr []byte) (Certificates, error) {
	const op = "signing a CSR at the Connector"
	var out struct {
		Result *wireCertificates `json:"result"`
	}
	vars := map[string]any{"csr": base64.StdEncoding.EncodeToString(csr)}
	if err := caller.Retry(ctx, op, func(ctx context.Context) error {
		return c.call(ctx, url, token, mutationSign, vars, &out)
	}); err != nil {
		return Certificates{}, err
	}
	if out.Result == nil {
		return Certificates{}, &Error{Op: op, System: "connector", Attempts: 1, Err: errors.New("the answer has no certificates")}
	}
	var certs Certificates
	for _, f := range []struct {
		name string
		in   string
		out  *[]byte
	}{{"certificateChain", out.Result.Chain, &certs.Chain}, {"caCertificate", out.Result.CA, &certs.CA}, {"clientCertificate", out.Result.Client, &certs.Client}} {
		b, err := base64.StdEncoding.DecodeString(f.in)
		if err != nil || len(b) == 0 {
			return Certificates{}, &Error{Op: op, System: "connector", Attempts: 1, Err: fmt.Errorf("%s is not base64 of a certificate", f.name)}
		}
		*f.out = b
	}
	return certs, nil
}

// RevokeCertificate revokes the client certificate at the certificate-secured endpoint at url:
// the Connector never renews it again.
func (c *Client) RevokeCertificate(ctx context.Context, url string) error {
	var out struct {
		Result bool `json:"result"`
	}
	if err := c.caller.Retry(ctx, "revoking the client certificate at the Connector", func(ctx context.Context) error {
		return c.call(ctx, url, "", mutationRevoke, nil, &out)
	}); err != nil {
		return err
	}
	if !out.Result {
		return &Error{Op: "revoking the client certificate at the Connector", System: "connector", Attempts: 1, Err: errors.New("the Connector answered false")}
	}
	return nil
}

// call makes one GraphQL request, with the token when it is not empty, and decodes its data into
// out. GraphQL errors are permanent but for InternalError.
func (c *Client) call(ctx context.Context, url, token, query string, vars map[string]any, out any) error {
	var resp struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	authorize := func(r *http.Request) {
		if token != "" {
			r.Header.Set(TokenHeader, token)
		}
	}
	body := map[string]any{"query": query, "variables": vars}
	if _, err := clientkit.DoJSON(ctx, c.http, authorize, http.MethodPost, url, "", nil, body, &resp); err != nil {
		if code := clientkit.StatusOf(err); code == http.StatusUnauthorized || code == http.StatusForbidden {
			return clientkit.Permanent(fmt.Errorf("%w: %w", ErrUnauthorized, err))
		}
		return err
	}
	if len(resp.Errors) > 0 {
		// Compass names the kind of the first error in extensions.error.
		kind, _ := resp.Errors[0].Extensions["error"].(string)
		msgs := make([]string, 0, len(resp.Errors))
		for _, e := range resp.Errors {
			msgs = append(msgs, e.Message)
		}
		err := fmt.Errorf("the Connector answered %s: %s", kind, strings.Join(msgs, "; "))
		switch kind {
		case KindInternalError:
			return err
		case KindUnauthorized:
			return clientkit.Permanent(fmt.Errorf("%w: %w", ErrUnauthorized, err))
		case KindInvalidData:
			return clientkit.Permanent(fmt.Errorf("%w: %w", ErrInvalidCSR, err))
		}
		return clientkit.Permanent(err)
	}
	if err := json.Unmarshal(resp.Data, out); err != nil {
		return clientkit.Permanent(fmt.Errorf("decoding the Connector's data: %w", err))
	}
	return nil
}
