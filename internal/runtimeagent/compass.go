package runtimeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
)

// Connector is what the agent asks the Connector (internal/connector's client in production): on
// the token-secured endpoint with a one-time token, on the certificate-secured one with its
// client certificate.
type Connector interface {
	Configuration(ctx context.Context, url, token string) (connector.Configuration, error)
	SignCSR(ctx context.Context, url, token string, csrPEM []byte) (connector.Certificates, error)
	CertificateConfiguration(ctx context.Context, url string, creds ClientCredentials) (connector.Configuration, error)
	RenewCertificate(ctx context.Context, url string, creds ClientCredentials, csrPEM []byte) (connector.Certificates, error)
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
	// Auths are the application's system auths: their IDs are the Application's client IDs.
	Auths []struct {
		ID string `json:"id"`
	} `json:"auths"`
	Bundles struct {
		Data []DirectorBundle `json:"data"`
	} `json:"bundles"`
}

// DirectorBundle is a bundle (package) of APIs with its default credentials.
type DirectorBundle struct {
	ID                  string  `json:"id"`
	Name                string  `json:"name"`
	Description         *string `json:"description"`
	DefaultInstanceAuth *struct {
		// Credential is a CredentialData: BasicCredentialData {username, password} or
		// OAuthCredentialData {clientId, clientSecret, url}; null when the bundle has none.
		Credential json.RawMessage `json:"credential"`
	} `json:"defaultInstanceAuth"`
}

// Director is what the agent asks the Director over mutual TLS.
type Director interface {
	ApplicationsForRuntime(ctx context.Context, url, tenant, runtimeID string, creds ClientCredentials) ([]DirectorApplication, error)
	SetRuntimeLabel(ctx context.Context, url, tenant, runtimeID, key, value string, creds ClientCredentials) error
	// SetRuntimeStatusCondition sets the runtime's status condition (one of the Condition*
	// constants) unless it has it already.
	SetRuntimeStatusCondition(ctx context.Context, url, tenant, runtimeID, condition string, creds ClientCredentials) error
}

// The Director's RuntimeStatusCondition values the agent reports.
const (
	ConditionConnected = "CONNECTED"
	ConditionFailed    = "FAILED"
)

// Compass calls the Connector (through internal/connector) and the Director. The clients of
// the current certificate are kept, so connections are reused until the certificate changes.
type Compass struct {
	tokenClient *connector.Client
	timeout     time.Duration

	mu       sync.Mutex
	serial   string // of the certificate the clients below present
	certConn *connector.Client
	director graphqlClient
}

var (
	_ Connector = (*Compass)(nil)
	_ Director  = (*Compass)(nil)
)

// NewCompass trusts caFile (PEM, optional: the system roots when empty) for the token-secured
// Connector; timeout bounds one request.
func NewCompass(caFile string, timeout time.Duration) (*Compass, error) {
	roots, err := connector.LoadRoots(caFile)
	if err != nil {
		return nil, err
	}
	return &Compass{tokenClient: connector.New(connector.Options{Roots: roots, Timeout: timeout}), timeout: timeout}, nil
}

// clients are the certificate-secured Connector client and the Director client presenting creds.
func (c *Compass) clients(creds ClientCredentials) (*connector.Client, graphqlClient, error) {
	cert, err := creds.ClientCertificate()
	if err != nil {
		return nil, graphqlClient{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	serial := cert.SerialNumber.String()
	if c.certConn != nil && c.serial == serial {
		return c.certConn, c.director, nil
	}
	cfg, err := creds.TLSConfig()
	if err != nil {
		return nil, graphqlClient{}, err
	}
	if c.director.http != nil {
		c.director.http.CloseIdleConnections() // they present the previous certificate
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	c.serial = serial
	c.certConn = connector.New(connector.Options{Roots: cfg.RootCAs, Certificate: &cfg.Certificates[0], Timeout: c.timeout})
	c.director = graphqlClient{http: &http.Client{Transport: tr, Timeout: c.timeout}}
	return c.certConn, c.director, nil
}

// Configuration asks the token-secured Connector for the CSR info, a new token and the URLs.
func (c *Compass) Configuration(ctx context.Context, url, token string) (connector.Configuration, error) {
	conf, err := c.tokenClient.Configuration(ctx, url, token)
	if err != nil {
		return conf, err
	}
	if conf.Token == "" || conf.DirectorURL == "" || conf.CertificateSecuredConnectorURL == "" {
		return conf, fmt.Errorf("the Connector at %s answered without the next token or the management plane URLs", url)
	}
	return conf, nil
}

// SignCSR has the token-secured Connector sign the CSR.
func (c *Compass) SignCSR(ctx context.Context, url, token string, csrPEM []byte) (connector.Certificates, error) {
	return c.tokenClient.SignCSR(ctx, url, token, csrPEM)
}

// CertificateConfiguration asks the certificate-secured Connector for the configuration.
func (c *Compass) CertificateConfiguration(ctx context.Context, url string, creds ClientCredentials) (connector.Configuration, error) {
	cc, _, err := c.clients(creds)
	if err != nil {
		return connector.Configuration{}, err
	}
	return cc.CertificateConfiguration(ctx, url)
}

// RenewCertificate has the certificate-secured Connector sign a CSR for a new certificate.
func (c *Compass) RenewCertificate(ctx context.Context, url string, creds ClientCredentials, csrPEM []byte) (connector.Certificates, error) {
	cc, _, err := c.clients(creds)
	if err != nil {
		return connector.Certificates{}, err
	}
	return cc.RenewCertificate(ctx, url, csrPEM)
}

// RevokeCertificate revokes the calling certificate.
func (c *Compass) RevokeCertificate(ctx context.Context, url string, creds ClientCredentials) error {
	cc, _, err := c.clients(creds)
	if err != nil {
		return err
	}
	return cc.RevokeCertificate(ctx, url)
}

// pageSize of applicationsForRuntime.
const pageSize = 200

// queryApplications reads what the original Runtime Agent read of each application: its system
// auths and each bundle's defaultInstanceAuth credential (instanceAuth needs the ID of one of the
// runtime's BundleInstanceAuths and holds an auth, not credentials).
const queryApplications = `query($runtimeID: ID!, $first: Int, $after: PageCursor) {
	result: applicationsForRuntime(runtimeID: $runtimeID, first: $first, after: $after) {
		data {
			id name description providerName labels auths { id }
			bundles { data { id name description defaultInstanceAuth { credential {
				... on BasicCredentialData { username password }
				... on OAuthCredentialData { clientId clientSecret url }
			} } } }
		}
		pageInfo { hasNextPage endCursor } totalCount
	}
}`

// ApplicationsForRuntime fetches every application assigned to the runtime, page by page.
func (c *Compass) ApplicationsForRuntime(ctx context.Context, url, tenant, runtimeID string, creds ClientCredentials) ([]DirectorApplication, error) {
	_, g, err := c.clients(creds)
	if err != nil {
		return nil, err
	}
	var all []DirectorApplication
	vars := map[string]any{"runtimeID": runtimeID, "first": pageSize}
	for {
		var page struct {
			Data     []DirectorApplication `json:"data"`
			PageInfo struct {
				HasNextPage bool   `json:"hasNextPage"`
				EndCursor   string `json:"endCursor"`
			} `json:"pageInfo"`
		}
		if err := g.call(ctx, url, tenant, queryApplications, vars, &page); err != nil {
			return nil, fmt.Errorf("fetching the applications of runtime %s: %w", runtimeID, err)
		}
		all = append(all, page.Data...)
		if !page.PageInfo.HasNextPage || page.PageInfo.EndCursor == "" || page.PageInfo.EndCursor == vars["after"] {
			return all, nil
		}
		vars["after"] = page.PageInfo.EndCursor
	}
}

const mutationSetLabel = `mutation($runtimeID: ID!, $key: String!, $value: Any!) {
	result: setRuntimeLabel(runtimeID: $runtimeID, key: $key, value: $value) { key value }
}`

// SetRuntimeLabel sets one label of the runtime.
func (c *Compass) SetRuntimeLabel(ctx context.Context, url, tenant, runtimeID, key, value string, creds ClientCredentials) error {
	_, g, err := c.clients(creds)
	if err != nil {
		return err
	}
	if err := g.call(ctx, url, tenant, mutationSetLabel, map[string]any{"runtimeID": runtimeID, "key": key, "value": value}, nil); err != nil {
		return fmt.Errorf("setting label %s of runtime %s: %w", key, runtimeID, err)
	}
	return nil
}

// TLSConfig is for mutual TLS: the client certificate presented, the Connector's CA trusted.
func (c ClientCredentials) TLSConfig() (*tls.Config, error) {
	pair, err := connector.KeyPair(c.CertificateChain, c.PrivateKey)
	if err != nil {
		return nil, err
	}
	pool, err := connector.Pool(c.CACertificate)
	if err != nil {
		return nil, fmt.Errorf("the Connector's CA: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ClientCertificate parses the client certificate (the first of the chain).
func (c ClientCredentials) ClientCertificate() (*x509.Certificate, error) {
	block, _ := pem.Decode(c.CertificateChain)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("the client certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the client certificate: %w", err)
	}
	return cert, nil
}

const queryRuntime = `query($id: ID!) {
	result: runtime(id: $id) { id name description labels status { condition } }
}`

const mutationUpdateRuntime = `mutation($id: ID!, $in: RuntimeUpdateInput!) {
	result: updateRuntime(id: $id, in: $in) { id }
}`

// refusedLabel is the label the Director manages itself and refuses in an update.
const refusedLabel = "scenarios"

// SetRuntimeStatusCondition reads the runtime and, when its condition differs, writes it back
// with the condition, as the original agent did: the Director has no mutation for the condition
// alone, and updateRuntime replaces the name, description and labels too.
func (c *Compass) SetRuntimeStatusCondition(ctx context.Context, url, tenant, runtimeID, condition string, creds ClientCredentials) error {
	_, g, err := c.clients(creds)
	if err != nil {
		return err
	}
	var rt struct {
		ID          string         `json:"id"`
		Name        string         `json:"name"`
		Description *string        `json:"description"`
		Labels      map[string]any `json:"labels"`
		Status      *struct {
			Condition string `json:"condition"`
		} `json:"status"`
	}
	if err := g.call(ctx, url, tenant, queryRuntime, map[string]any{"id": runtimeID}, &rt); err != nil {
		return fmt.Errorf("reading runtime %s: %w", runtimeID, err)
	}
	if rt.Status != nil && rt.Status.Condition == condition {
		return nil
	}
	labels := make(map[string]any, len(rt.Labels))
	for k, v := range rt.Labels {
		if k != refusedLabel {
			labels[k] = v
		}
	}
	in := map[string]any{"name": rt.Name, "labels": labels, "statusCondition": condition}
	if rt.Description != nil {
		in["description"] = *rt.Description
	}
	if err := g.call(ctx, url, tenant, mutationUpdateRuntime, map[string]any{"id": runtimeID, "in": in}, nil); err != nil {
		return fmt.Errorf("setting the status condition of runtime %s to %s: %w", runtimeID, condition, err)
	}
	return nil
}
