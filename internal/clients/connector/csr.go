package connector

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"strings"
)

// ParseSubject parses the subject the Connector hands out ("O=..,OU=..,L=..,ST=..,C=..,CN=..").
func ParseSubject(s string) (pkix.Name, error) {
	var n pkix.Name
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || v == "" {
			return pkix.Name{}, fmt.Errorf("subject %q: %q is not KEY=value", s, part)
		}
		if seen[k] {
			return pkix.Name{}, fmt.Errorf("subject %q: %s given twice", s, k)
		}
		seen[k] = true
		switch k {
		case "O":
			n.Organization = []string{v}
		case "OU":
			n.OrganizationalUnit = []string{v}
		case "L":
			n.Locality = []string{v}
		case "ST":
			n.Province = []string{v}
		case "C":
			n.Country = []string{v}
		case "CN":
			n.CommonName = v
		default:
			return pkix.Name{}, fmt.Errorf("subject %q: unknown attribute %s", s, k)
		}
	}
	if n.CommonName == "" {
		return pkix.Name{}, fmt.Errorf("subject %q has no CN", s)
	}
	return n, nil
}

// NewKey generates an RSA key of bits (4096 for the Connector's "rsa4096").
func NewKey(bits int) (*rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, fmt.Errorf("generating a %d-bit RSA key: %w", bits, err)
	}
	return key, nil
}

// NewCSR is a CSR (PEM) for subject, in the Connector's form, signed with key.
func NewCSR(subject string, key *rsa.PrivateKey) ([]byte, error) {
	name, err := ParseSubject(subject)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: name}, key)
	if err != nil {
		return nil, fmt.Errorf("creating the CSR: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// KeyPEM is key in PEM (PKCS #1), as the client certificate's Secret keeps it.
func KeyPEM(key *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// KeyPair is the TLS certificate of the chain with key (PEM), for the mutual-TLS calls.
func KeyPair(chain, key []byte) (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pairing the client certificate with its key: %w", err)
	}
	return pair, nil
}

// Pool is a pool of the CA certificates in pemCerts, e.g. the caCertificate the Connector gave.
func Pool(pemCerts []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCerts) {
		return nil, fmt.Errorf("no PEM certificate to trust")
	}
	return pool, nil
}
