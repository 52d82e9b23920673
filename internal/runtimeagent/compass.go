package runtimeagent

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
	"time"
)

// Configuration is the Connector's answer to the configuration query.
type Configuration struct {
	// Token is the new one-time token (token-secured endpoint only).
	Token                          string
	Subject                        string
	KeyAlgorithm                   string
	DirectorURL                    string
	CertificateSecuredConnectorURL string
}

// Connector is what the agent asks the Connector: on the token-secured endpoint with a
// one-time token, on the certificate-secured one with its client certificate.
type Connector interface {
	Configuration(ctx context.Context, url, token string) (Configuration, error)
	SignCSR(ctx context.Context, url, token string, csrPEM []byte) (CertificateSet, error)
	SecuredConfiguration(ctx context.Context, url string, creds ClientCredentials) (Configuration, error)
	RenewCertificate(ctx context.Context, url string, creds ClientCredentials, csrPEM []byte) (CertificateSet, error)
	RevokeCertificate(ctx context.Context, url string, creds ClientCredentials) error
}

// DirectorApplication is an application assigned to the runtime, as applicationsForRuntime
// returns it.
type DirectorApplication struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Description  *string        `json:"description"`
	ProviderName *string        `json:"providerName"`
	Labels       map[string]any `json:"labels"`
	Packages     struct {
		Data []DirectorPackage `json:"data"`
	} `json:"packages"`
}

// DirectorPackage is a package (bundle) with the credentials valid for this runtime.
type DirectorPackage struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Description  *string `json:"description"`
	InstanceAuth *struct {
		Credentials json.RawMessage `json:"credentials"`
	} `json:"instanceAuth"`
}

// Director is what the agent asks the Director over mutual TLS.
type Director interface {
	ApplicationsForRuntime(ctx context.Context, url, tenant, runtimeID string, creds ClientCredentials) ([]DirectorApplication, error)
	SetRuntimeLabel(ctx context.Context, url, tenant, runtimeID, key, value string, creds ClientCredentials) error
}

// Compass calls the Connector and the Director over HTTPS; every call is bounded by Timeout.
type Compass struct {
	// TokenRoots verify the token-secured Connector (nil: the system roots).
	TokenRoots *x509.CertPool
	Timeout    time.Duration
}

var (
	_ Connector = Compass{}
	_ Director  = Compass{}
)

// NewCompass trusts caFile (PEM, optional) for the token-secured Connector.
func NewCompass(caFile string, timeout time.Duration) (Compass, error) {
	c := Compass{Timeout: timeout}
	if caFile == "" {
		return c, nil
	}
	pemData, err := os.ReadFile(caFile)
	if err != nil {
		return c, fmt.Errorf("reading APP_CONNECTOR_CA_FILE: %w", err)
	}
	c.TokenRoots = x509.NewCertPool()
	if !c.TokenRoots.AppendCertsFromPEM(pemData) {
		return c, fmt.Errorf("APP_CONNECTOR_CA_FILE %s holds no PEM certificate", caFile)
	}
	return c, nil
}

func (c Compass) client(system string, tlsCfg *tls.Config) graphqlClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.DisableKeepAlives = true // a new certificate after each renewal: no pooled connection outlives it
	return graphqlClient{system: system, http: &http.Client{Transport: tr, Timeout: c.Timeout}}
}

func (c Compass) tokenClient() graphqlClient {
	return c.client("Connector", &tls.Config{RootCAs: c.TokenRoots, MinVersion: tls.VersionTLS12})
}

func (c Compass) mtlsClient(system string, creds ClientCredentials) (graphqlClient, error) {
	cfg, err := creds.TLSConfig()
	if err != nil {
		return graphqlClient{}, err
	}
	return c.client(system, cfg), nil
}

const (
	queryConfiguration = `query { result: configuration { token { token } certificateSigningRequestInfo { subject keyAlgorithm } managementPlaneInfo { directorURL certificateSecuredConnectorURL } } }`
	// The certificate-secured endpoint hands out no token.
	querySecuredConfiguration = `query { result: configuration { certificateSigningRequestInfo { subject keyAlgorithm } managementPlaneInfo { directorURL certificateSecuredConnectorURL } } }`
	mutationRevoke            = `mutation { result: revokeCertificate }`
)

type configurationAnswer struct {
	Token *struct {
		Token string `json:"token"`
	} `json:"token"`
	CSRInfo struct {
		Subject      string `json:"subject"`
		KeyAlgorithm string `json:"keyAlgorithm"`
	} `json:"certificateSigningRequestInfo"`
	ManagementPlaneInfo *struct {
		DirectorURL                    string `json:"directorURL"`
		CertificateSecuredConnectorURL string `json:"certificateSecuredConnectorURL"`
	} `json:"managementPlaneInfo"`
}

func (a configurationAnswer) configuration() Configuration {
	c := Configuration{Subject: a.CSRInfo.Subject, KeyAlgorithm: a.CSRInfo.KeyAlgorithm}
	if a.Token != nil {
		c.Token = a.Token.Token
	}
	if a.ManagementPlaneInfo != nil {
		c.DirectorURL = a.ManagementPlaneInfo.DirectorURL
		c.CertificateSecuredConnectorURL = a.ManagementPlaneInfo.CertificateSecuredConnectorURL
	}
	return c
}

// Configuration asks the token-secured Connector for the CSR info, a new token and the URLs.
func (c Compass) Configuration(ctx context.Context, url, token string) (Configuration, error) {
	var a configurationAnswer
	if err := c.tokenClient().call(ctx, url, map[string]string{"Connector-Token": token}, queryConfiguration, &a); err != nil {
		return Configuration{}, fmt.Errorf("fetching the configuration with the one-time token: %w", err)
	}
	conf := a.configuration()
	if conf.Token == "" || conf.Subject == "" || conf.CertificateSecuredConnectorURL == "" || conf.DirectorURL == "" {
		return Configuration{}, errors.New("the Connector's configuration lacks the token, the subject or the management plane URLs")
	}
	return conf, nil
}

func signMutation(csrPEM []byte) string {
	return `mutation { result: signCertificateSigningRequest(csr: ` + quote(base64.StdEncoding.EncodeToString(csrPEM)) +
		`) { certificateChain caCertificate clientCertificate } }`
}

type certificatesAnswer struct {
	CertificateChain  string `json:"certificateChain"`
	CACertificate     string `json:"caCertificate"`
	ClientCertificate string `json:"clientCertificate"`
}

func (a certificatesAnswer) decode() (CertificateSet, error) {
	var set CertificateSet
	for _, f := range []struct {
		name string
		in   string
		out  *[]byte
	}{{"certificateChain", a.CertificateChain, &set.CertificateChain}, {"caCertificate", a.CACertificate, &set.CACertificate}, {"clientCertificate", a.ClientCertificate, &set.ClientCertificate}} {
		b, err := base64.StdEncoding.DecodeString(f.in)
		if err != nil || len(b) == 0 {
			return set, fmt.Errorf("the Connector's %s is not base64 of a PEM certificate", f.name)
		}
		*f.out = b
	}
	return set, nil
}

// SignCSR has the token-secured Connector sign the CSR.
func (c Compass) SignCSR(ctx context.Context, url, token string, csrPEM []byte) (CertificateSet, error) {
	var a certificatesAnswer
	if err := c.tokenClient().call(ctx, url, map[string]string{"Connector-Token": token}, signMutation(csrPEM), &a); err != nil {
		return CertificateSet{}, fmt.Errorf("signing the CSR with the one-time token: %w", err)
	}
	return a.decode()
}

// SecuredConfiguration asks the certificate-secured Connector for the configuration.
func (c Compass) SecuredConfiguration(ctx context.Context, url string, creds ClientCredentials) (Configuration, error) {
	g, err := c.mtlsClient("certificate-secured Connector", creds)
	if err != nil {
		return Configuration{}, err
	}
	var a configurationAnswer
	if err := g.call(ctx, url, nil, querySecuredConfiguration, &a); err != nil {
		return Configuration{}, fmt.Errorf("fetching the configuration with the client certificate: %w", err)
	}
	return a.configuration(), nil
}

// RenewCertificate has the certificate-secured Connector sign a CSR for a new certificate.
func (c Compass) RenewCertificate(ctx context.Context, url string, creds ClientCredentials, csrPEM []byte) (CertificateSet, error) {
	g, err := c.mtlsClient("certificate-secured Connector", creds)
	if err != nil {
		return CertificateSet{}, err
	}
	var a certificatesAnswer
	if err := g.call(ctx, url, nil, signMutation(csrPEM), &a); err != nil {
		return CertificateSet{}, fmt.Errorf("renewing the client certificate: %w", err)
	}
	return a.decode()
}

// RevokeCertificate revokes the calling certificate.
func (c Compass) RevokeCertificate(ctx context.Context, url string, creds ClientCredentials) error {
	g, err := c.mtlsClient("certificate-secured Connector", creds)
	if err != nil {
		return err
	}
	var ok bool
	if err := g.call(ctx, url, nil, mutationRevoke, &ok); err != nil {
		return fmt.Errorf("revoking the client certificate: %w", err)
	}
	if !ok {
		return errors.New("the Connector did not revoke the certificate")
	}
	return nil
}

// pageSize of applicationsForRuntime.
const pageSize = 200

// ApplicationsForRuntime fetches every application assigned to the runtime, page by page.
func (c Compass) ApplicationsForRuntime(ctx context.Context, url, tenant, runtimeID string, creds ClientCredentials) ([]DirectorApplication, error) {
	g, err := c.mtlsClient("Director", creds)
	if err != nil {
		return nil, err
	}
	var all []DirectorApplication
	after := ""
	for {
		args := fmt.Sprintf("runtimeID: %s, first: %d", quote(runtimeID), pageSize)
		if after != "" {
			args += ", after: " + quote(after)
		}
		q := `query { result: applicationsForRuntime(` + args + `) { data { id name description providerName labels packages: bundles { data { id name description instanceAuth { credentials } } } } pageInfo { hasNextPage endCursor } totalCount } }`
		var page struct {
			Data     []DirectorApplication `json:"data"`
			PageInfo struct {
				HasNextPage bool   `json:"hasNextPage"`
				EndCursor   string `json:"endCursor"`
			} `json:"pageInfo"`
		}
		if err := g.call(ctx, url, map[string]string{"Tenant": tenant}, q, &page); err != nil {
			return nil, fmt.Errorf("fetching the applications of runtime %s: %w", runtimeID, err)
		}
		all = append(all, page.Data...)
		if !page.PageInfo.HasNextPage || page.PageInfo.EndCursor == "" || page.PageInfo.EndCursor == after {
			return all, nil
		}
		after = page.PageInfo.EndCursor
	}
}

// SetRuntimeLabel sets one label of the runtime.
func (c Compass) SetRuntimeLabel(ctx context.Context, url, tenant, runtimeID, key, value string, creds ClientCredentials) error {
	g, err := c.mtlsClient("Director", creds)
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`mutation { result: setRuntimeLabel(runtimeID: %s, key: %s, value: %s) { key value } }`, quote(runtimeID), quote(key), quote(value))
	if err := g.call(ctx, url, map[string]string{"Tenant": tenant}, q, nil); err != nil {
		return fmt.Errorf("setting label %s of runtime %s: %w", key, runtimeID, err)
	}
	return nil
}
