package runtimeagent

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Keys of the certificate Secrets (as the Compass Runtime Agent writes them).
const (
	secretKeyCertificate = "crt"    // client certificate followed by the chain, PEM
	secretKeyPrivateKey  = "key"    // the client key, PKCS#1 PEM
	secretKeyCA          = "cacert" // the Connector's CA, PEM
)

// ClientCredentials are the agent's client certificate, its key and the Connector's CA.
type ClientCredentials struct {
	// CertificateChain is the client certificate followed by its chain, PEM.
	CertificateChain []byte
	PrivateKey       []byte
	CACertificate    []byte
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

// TLSConfig is for mutual TLS: the client certificate presented, the Connector's CA trusted.
func (c ClientCredentials) TLSConfig() (*tls.Config, error) {
	pair, err := tls.X509KeyPair(c.CertificateChain, c.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("loading the client certificate and key: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CACertificate) {
		return nil, errors.New("the CA certificate is not PEM")
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// CertificateSet is what the Connector answers to signCertificateSigningRequest (PEM, decoded
// from base64).
type CertificateSet struct {
	CertificateChain  []byte
	CACertificate     []byte
	ClientCertificate []byte
}

// newKeyAndCSR makes a new RSA key of bits and a CSR with exactly the subject the Connector
// handed out.
func newKeyAndCSR(ctx context.Context, subject string, bits int) (keyPEM, csrPEM []byte, err error) {
	name, err := ParseSubject(subject)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, nil, fmt.Errorf("generating an RSA key of %d bits: %w", bits, err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: name, SignatureAlgorithm: x509.SHA256WithRSA}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the CSR: %w", err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	csrPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	return keyPEM, csrPEM, nil
}

// ParseSubject reads a subject as the Connector hands it out,
// "O=org,OU=unit,L=locality,ST=province,C=country,CN=runtime-id" (a comma inside a value is
// escaped with a backslash).
func ParseSubject(subject string) (pkix.Name, error) {
	var name pkix.Name
	parts, err := splitEscaped(subject)
	if err != nil {
		return name, err
	}
	for _, part := range parts {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return name, fmt.Errorf("subject %q: %q is not key=value", subject, part)
		}
		switch strings.TrimSpace(k) {
		case "CN":
			name.CommonName = v
		case "O":
			name.Organization = append(name.Organization, v)
		case "OU":
			name.OrganizationalUnit = append(name.OrganizationalUnit, v)
		case "L":
			name.Locality = append(name.Locality, v)
		case "ST":
			name.Province = append(name.Province, v)
		case "C":
			name.Country = append(name.Country, v)
		default:
			return name, fmt.Errorf("subject %q: unknown attribute %q", subject, k)
		}
	}
	if name.CommonName == "" {
		return name, fmt.Errorf("subject %q has no CN", subject)
	}
	return name, nil
}

func splitEscaped(s string) ([]string, error) {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("subject %q ends in an escape", s)
			}
			i++
			cur.WriteByte(s[i])
		case ',':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(parts, cur.String()), nil
}

// needsRenewal: less than threshold of the certificate's lifetime remains at now.
func needsRenewal(cert *x509.Certificate, threshold float64, now time.Time) bool {
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Sub(now) < time.Duration(float64(lifetime)*threshold)
}
