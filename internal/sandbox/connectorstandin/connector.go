// Package connector is the sandbox stand-in for the Compass Connector as the Runtime Agent uses
// it, with a real CA (crypto/x509, RSA). Its token-secured endpoint (POST /connector/graphql,
// header Connector-Token) answers the configuration query, which uses up a one-time token the
// Director stand-in issued and hands out a new one, and signs a CSR whose subject is exactly the
// one handed out for the token's runtime. Its certificate-secured endpoint (POST
// /connector/mtls/graphql) requires a client certificate it issued and did not revoke: it answers
// configuration, signs renewal CSRs with the same subject and revokes the calling certificate,
// which then stays valid for TLS until it expires but is never renewed. Both need TLS: the
// sandbox's TLS listener (see internal/sandbox/standins) serves them with a certificate of the
// same CA. The CA is kept in the store and generated once; issued certificates, revocations and
// the certificate lifetime are kept like the other stand-ins' state.
package connectorstandin

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/gql"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "connector"

// Paths of the endpoints, relative to the stand-in.
const (
	TokenSecuredPath       = "/graphql"
	CertificateSecuredPath = "/mtls/graphql"
)

// TokenHeader carries the one-time token to the token-secured endpoint.
const TokenHeader = "Connector-Token"

// KeyAlgorithm is the key algorithm handed out; the stand-in signs RSA keys of at least
// MinKeyBits, so that tests may use smaller keys than 4096 bits.
const (
	KeyAlgorithm = "rsa4096"
	MinKeyBits   = 2048
)

// DefaultCertificateLifetime is the lifetime of issued client certificates until the admin
// endpoint changes it.
const DefaultCertificateLifetime = 90 * 24 * time.Hour

// The subject handed out is SubjectPrefix followed by CN=<runtime ID>.
const SubjectPrefix = "O=Kyma,OU=Sandbox,L=Waldorf,ST=Baden-Wuerttemberg,C=DE,"

// Tokens are the Director stand-in's one-time tokens (director.StandIn.RedeemOneTimeToken).
type Tokens interface {
	RedeemOneTimeToken(ctx context.Context, token string, renew bool, use func(owner directorstandin.TokenOwner, next string) error) error
}

// Options configures the stand-in.
type Options struct {
	// Tokens validates and uses up one-time tokens.
	Tokens Tokens
	// DirectorURL and CertificateSecuredURL are the management plane info handed out.
	DirectorURL           string
	CertificateSecuredURL string
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Store keeps the CA, the issued certificates and the lifetime; Open loads them from it.
	Store durable.Store
}

// Certificate is a client certificate the stand-in issued.
type Certificate struct {
	Seq       int64  `json:"seq"`
	Serial    string `json:"serial"`
	RuntimeID string `json:"runtimeID"`
	// ApplicationID is set instead of RuntimeID for an application's certificate.
	ApplicationID string    `json:"applicationID,omitempty"`
	Tenant        string    `json:"tenant,omitempty"`
	Subject       string    `json:"subject"`
	NotBefore     time.Time `json:"notBefore"`
	NotAfter      time.Time `json:"notAfter"`
	// RenewalOf is the serial of the certificate whose holder asked for this one.
	RenewalOf string     `json:"renewalOf,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// Objects is the inspection snapshot served at GET /_sandbox/connector/objects.
type Objects struct {
	CertificateLifetime string `json:"certificateLifetime"`
	// Certificates are the issued client certificates in issue order.
	Certificates []Certificate `json:"certificates"`
	// Calls counts operations by name and refusals ("refused.token", "refused.certificate",
	// "refused.tls").
	Calls map[string]int `json:"calls"`
}

// StandIn is the Connector stand-in; it implements sandbox.System and sandbox.Administered.
type StandIn struct {
	opts   Options
	schema *gql.Schema
	ca     *ca

	durable *durable.Durable
	handler http.Handler
	admin   http.Handler

	mu       sync.Mutex
	certs    *durable.Table[Certificate] // by serial number in hex
	lifetime time.Duration
	seq      *durable.Counts
	calls    *durable.Counts
}

// Open returns a stand-in with the CA and the state kept in opts.Store (a new MemoryStore when
// nil), generating the CA when the store has none.
func Open(ctx context.Context, opts Options) (*StandIn, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Store == nil {
		opts.Store = durable.NewMemoryStore()
	}
	if opts.Tokens == nil {
		return nil, errors.New("the connector stand-in needs the director stand-in's one-time tokens")
	}
	authority, err := loadCA(ctx, opts.Store, opts.Now())
	if err != nil {
		return nil, err
	}
	s := &StandIn{opts: opts, ca: authority, schema: gql.MustLoad("connector.graphql", schemaSDL)}
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu, Encode: s.encode, Restore: s.restore,
		Kinds: []string{kindSettings}})
	s.certs = durable.NewTable[Certificate](s.durable, kindCertificate, false)
	s.seq = s.durable.Counts(kindSeq)
	s.calls = s.durable.Tally(kindCalls)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("POST "+TokenSecuredPath, s.handleTokenSecured)
	m.HandleFunc("POST "+CertificateSecuredPath, s.handleCertificateSecured)
	s.handler = s.durable.Handler(m)
	a := http.NewServeMux()
	a.HandleFunc("GET /ca.pem", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(s.ca.pem)
	})
	a.HandleFunc("GET /certificate-lifetime", s.handleGetLifetime)
	a.HandleFunc("PUT /certificate-lifetime", s.handlePutLifetime)
	s.admin = s.durable.Handler(a)
	return s, nil
}

// Name implements sandbox.System.
func (s *StandIn) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /connector.
func (s *StandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Admin implements sandbox.Administered: /_sandbox/connector/ca.pem and certificate-lifetime.
func (s *StandIn) Admin() http.Handler { return s.admin }

// Objects implements sandbox.System.
func (s *StandIn) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets the issued certificates (which the
// certificate-secured endpoint then refuses), the lifetime and the counts; the CA stays.
func (s *StandIn) Reset(ctx context.Context) error { return s.durable.Reset(ctx) }

// Snapshot returns the inspection snapshot.
func (s *StandIn) Snapshot() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Objects{CertificateLifetime: s.lifetimeLocked().String(), Certificates: []Certificate{}, Calls: s.calls.Map()}
	for _, c := range s.certs.All() {
		out.Certificates = append(out.Certificates, *c)
	}
	sort.Slice(out.Certificates, func(i, j int) bool { return out.Certificates[i].Seq < out.Certificates[j].Seq })
	return out
}

// CAPEM is the CA's certificate in PEM, which clients of the TLS listener trust.
func (s *StandIn) CAPEM() []byte { return append([]byte(nil), s.ca.pem...) }

// CAPool is a pool holding the CA's certificate.
func (s *StandIn) CAPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(s.ca.cert)
	return p
}

// TLSConfig is the TLS listener's configuration: a new server certificate of the CA for hosts
// (names or IP addresses), and client certificates verified against the CA when a client
// presents one (the endpoints that need one check for it).
func (s *StandIn) TLSConfig(hosts []string) (*tls.Config, error) {
	cert, err := s.ca.serverCertificate(hosts, s.opts.Now())
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    s.CAPool(),
		// Client certificates are checked at the stand-in's time, at which they were issued.
		Time: s.opts.Now,
	}, nil
}

func (s *StandIn) lifetimeLocked() time.Duration {
	if s.lifetime > 0 {
		return s.lifetime
	}
	return DefaultCertificateLifetime
}

// Subject is the subject handed out to the runtime.
func Subject(runtimeID string) string { return SubjectPrefix + "CN=" + runtimeID }

// refuse answers a request the endpoint does not accept, in GraphQL's error shape.
func (s *StandIn) refuse(w http.ResponseWriter, status int, event, msg string) {
	s.mu.Lock()
	s.calls.Inc(event)
	s.mu.Unlock()
	sandbox.WriteJSON(w, status, gql.Response{Errors: []gql.Error{{Message: msg, Extensions: map[string]any{"error": gql.KindUnauthorized}}}})
}

// errRejected keeps the one-time token valid when the operation failed.
var errRejected = errors.New("the operation failed")

// handleTokenSecured serves the token-secured endpoint: the operation runs when the one-time
// token is valid and uses it up when it succeeds; configuration hands out a new one.
func (s *StandIn) handleTokenSecured(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		s.refuse(w, http.StatusForbidden, "refused.tls", "the Connector is served over TLS only: use the sandbox's TLS listener")
		return
	}
	token := strings.TrimSpace(r.Header.Get(TokenHeader))
	if token == "" {
		s.refuse(w, http.StatusForbidden, "refused.token", "the "+TokenHeader+" header is required")
		return
	}
	op, ok := s.schema.Decode(w, r)
	if !ok {
		return
	}
	renew := false
	for _, f := range op.RootFields() {
		renew = renew || f == "configuration"
	}
	var resp gql.Response
	err := s.opts.Tokens.RedeemOneTimeToken(r.Context(), token, renew, func(owner directorstandin.TokenOwner, next string) error {
		resp = s.execute(op, caller{runtimeID: owner.RuntimeID, applicationID: owner.ApplicationID, tenant: owner.Tenant, token: next})
		if len(resp.Errors) > 0 {
			return errRejected
		}
		return nil
	})
	switch {
	case errors.Is(err, directorstandin.ErrInvalidToken):
		s.refuse(w, http.StatusForbidden, "refused.token", "invalid token: "+err.Error())
	case err != nil && !errors.Is(err, errRejected):
		sandbox.WriteJSON(w, http.StatusServiceUnavailable, gql.Response{Errors: []gql.Error{{Message: err.Error(), Extensions: map[string]any{"error": gql.KindInternal}}}})
	default:
		sandbox.WriteJSON(w, http.StatusOK, resp)
	}
}

// handleCertificateSecured serves the certificate-secured endpoint to holders of a certificate
// the stand-in issued and did not revoke.
func (s *StandIn) handleCertificateSecured(w http.ResponseWriter, r *http.Request) {
	cert, ok := sandbox.ClientCertificate(r)
	if !ok {
		s.refuse(w, http.StatusUnauthorized, "refused.certificate", "a client certificate of the sandbox CA is required")
		return
	}
	serial := cert.SerialNumber.Text(16)
	s.mu.Lock()
	rec, issued := s.certs.Get(serial)
	var c caller
	if issued {
		c = caller{runtimeID: rec.RuntimeID, applicationID: rec.ApplicationID, tenant: rec.Tenant, serial: serial}
	}
	revoked := issued && rec.RevokedAt != nil
	s.mu.Unlock()
	switch {
	case !issued:
		s.refuse(w, http.StatusForbidden, "refused.certificate", fmt.Sprintf("certificate %s was not issued by this Connector", serial))
		return
	case revoked:
		s.refuse(w, http.StatusForbidden, "refused.certificate", fmt.Sprintf("certificate %s is revoked", serial))
		return
	}
	op, ok := s.schema.Decode(w, r)
	if !ok {
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, s.execute(op, c))
}

// caller is who a request is served for: the runtime of a one-time token (with the new token
// configuration hands out) or of a client certificate (serial).
type caller struct {
	runtimeID, tenant string
	applicationID     string // instead of runtimeID for an application's token or certificate
	token             string
	serial            string
}

// id is the caller's identity, the CN of its certificates.
func (c caller) id() string {
	if c.applicationID != "" {
		return c.applicationID
	}
	return c.runtimeID
}

func (s *StandIn) execute(op *gql.Operation, c caller) gql.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return op.Execute(func(name string, args map[string]any) (any, error) {
		s.calls.Inc(name)
		switch name {
		case "configuration":
			return s.configuration(c), nil
		case "signCertificateSigningRequest":
			csr, _ := args["csr"].(string)
			return s.sign(c, csr)
		case "revokeCertificate":
			return s.revoke(c)
		}
		return nil, gql.Errorf(gql.KindInternal, "field %s has no resolver", name)
	})
}

func (s *StandIn) configuration(c caller) gql.Object {
	var token any
	if c.token != "" {
		token = gql.Object{"token": c.token}
	}
	return gql.Object{
		"token":                         token,
		"certificateSigningRequestInfo": gql.Object{"subject": Subject(c.id()), "keyAlgorithm": KeyAlgorithm},
		"managementPlaneInfo":           gql.Object{"directorURL": s.opts.DirectorURL, "certificateSecuredConnectorURL": s.opts.CertificateSecuredURL},
	}
}

func invalidCSR(format string, args ...any) error {
	return gql.Errorf(gql.KindInvalidData, "invalid certificate signing request: "+format, args...)
}

// sign issues a client certificate for the CSR (base64 of PEM) when its subject is exactly the
// one handed out to the caller's runtime.
func (s *StandIn) sign(c caller, encoded string) (any, error) {
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, invalidCSR("not base64: %v", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, invalidCSR("not a PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, invalidCSR("%v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, invalidCSR("signature: %v", err)
	}
	pub, ok := csr.PublicKey.(*rsa.PublicKey)
	if !ok || pub.N.BitLen() < MinKeyBits {
		return nil, invalidCSR("the key must be RSA of at least %d bits", MinKeyBits)
	}
	want := Subject(c.id())
	if got := subjectString(csr); got != want {
		return nil, invalidCSR("subject %q is not %q", got, want)
	}
	now := s.opts.Now().UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(),
		Subject:      csr.Subject,
		NotBefore:    now,
		NotAfter:     now.Add(s.lifetimeLocked()),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	cert, certPEM, err := s.ca.issue(tmpl, pub)
	if err != nil {
		return nil, gql.Errorf(gql.KindInternal, "%v", err)
	}
	rec := &Certificate{Seq: int64(s.seq.Inc(seqCertificates)), Serial: cert.SerialNumber.Text(16), RuntimeID: c.runtimeID, ApplicationID: c.applicationID, Tenant: c.tenant,
		Subject: want, NotBefore: cert.NotBefore, NotAfter: cert.NotAfter, RenewalOf: c.serial}
	s.certs.Put(rec.Serial, rec)
	enc := base64.StdEncoding.EncodeToString
	return gql.Object{
		"certificateChain":  enc(append(append([]byte{}, certPEM...), s.ca.pem...)),
		"caCertificate":     enc(s.ca.pem),
		"clientCertificate": enc(certPEM),
	}, nil
}

// subjectString is the CSR's subject in the form handed out, or a description of what is wrong
// with it: every attribute exactly once, nothing else.
func subjectString(csr *x509.CertificateRequest) string {
	n := csr.Subject
	parts := []struct {
		key  string
		vals []string
	}{{"O", n.Organization}, {"OU", n.OrganizationalUnit}, {"L", n.Locality}, {"ST", n.Province}, {"C", n.Country}, {"CN", nil}}
	var b strings.Builder
	for _, p := range parts {
		if p.key == "CN" {
			p.vals = []string{n.CommonName}
		}
		if len(p.vals) != 1 {
			return fmt.Sprintf("%s (%s given %d times)", n.String(), p.key, len(p.vals))
		}
		if b.Len() > 0 {
			b.WriteString(",")
		}
		b.WriteString(p.key + "=" + p.vals[0])
	}
	if len(n.Names) != len(parts) {
		return fmt.Sprintf("%s (%d attributes, not %d)", n.String(), len(n.Names), len(parts))
	}
	return b.String()
}

// revoke revokes the calling certificate: it can no longer use this endpoint nor be renewed.
func (s *StandIn) revoke(c caller) (any, error) {
	rec, ok := s.certs.Get(c.serial)
	if c.serial == "" || !ok {
		return nil, gql.Errorf(gql.KindUnauthorized, "revokeCertificate needs the certificate-secured endpoint")
	}
	now := s.opts.Now().UTC()
	rec.RevokedAt = &now
	s.certs.Put(c.serial, rec)
	return true, nil
}

type lifetimeBody struct {
	Lifetime string `json:"lifetime"`
}

func (s *StandIn) handleGetLifetime(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	d := s.lifetimeLocked()
	s.mu.Unlock()
	sandbox.WriteJSON(w, http.StatusOK, lifetimeBody{Lifetime: d.String()})
}

// handlePutLifetime sets the lifetime of certificates issued from now on ({"lifetime": "10s"});
// "0s" or "" goes back to the default.
func (s *StandIn) handlePutLifetime(w http.ResponseWriter, r *http.Request) {
	var body lifetimeBody
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<12)).Decode(&body); err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, map[string]string{"message": "decoding the lifetime: " + err.Error()})
		return
	}
	var d time.Duration
	if body.Lifetime != "" {
		var err error
		if d, err = time.ParseDuration(body.Lifetime); err != nil || d < 0 || (d > 0 && d < time.Second) {
			sandbox.WriteJSON(w, http.StatusBadRequest, map[string]string{"message": fmt.Sprintf("lifetime %q must be a duration of at least 1s, or 0s for the default", body.Lifetime)})
			return
		}
	}
	s.mu.Lock()
	s.lifetime = d
	s.durable.Touch(kindSettings, keyLifetime)
	out := s.lifetimeLocked()
	s.mu.Unlock()
	sandbox.WriteJSON(w, http.StatusOK, lifetimeBody{Lifetime: out.String()})
}
