package connectorstandin

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// The CA is generated once and kept in the store under a system of its own, which a reset of the
// stand-in does not clear: certificates it issued, the TLS listener's included, stay valid across
// restarts and resets.
const (
	caSystem = "connector-ca"
	kindCA   = "ca"
	keyCA    = "ca"
	// caKeyBits is the size of the CA's and the TLS listener's keys.
	caKeyBits = 2048
	// caLifetime is how long the CA and the TLS listener's certificate are valid.
	caLifetime = 10 * 365 * 24 * time.Hour
)

// ca is the sandbox's certificate authority.
type ca struct {
	cert *x509.Certificate
	key  *rsa.PrivateKey
	pem  []byte
}

type storedCA struct {
	Certificate string `json:"certificate"`
	Key         string `json:"key"`
}

// loadCA returns the CA kept in store, generating and storing one when there is none.
func loadCA(ctx context.Context, store durable.Store, now time.Time) (*ca, error) {
	rows, err := store.Load(ctx, caSystem)
	if err != nil {
		return nil, fmt.Errorf("loading the sandbox CA: %w", err)
	}
	if b, ok := rows[kindCA][keyCA]; ok {
		var st storedCA
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("decoding the sandbox CA: %w", err)
		}
		return parseCA(st)
	}
	c, st, err := newCA(now)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding the sandbox CA: %w", err)
	}
	if err := store.Write(ctx, caSystem, durable.Rows{kindCA: {keyCA: b}}); err != nil {
		return nil, fmt.Errorf("storing the sandbox CA: %w", err)
	}
	return c, nil
}

func newCA(now time.Time) (*ca, storedCA, error) {
	key, err := rsa.GenerateKey(rand.Reader, caKeyBits)
	if err != nil {
		return nil, storedCA{}, fmt.Errorf("generating the sandbox CA's key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{Organization: []string{"Kyma Sandbox"}, CommonName: "Kyma Sandbox Connector CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, storedCA{}, fmt.Errorf("creating the sandbox CA's certificate: %w", err)
	}
	st := storedCA{
		Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		Key:         string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
	}
	c, err := parseCA(st)
	return c, st, err
}

func parseCA(st storedCA) (*ca, error) {
	cb, _ := pem.Decode([]byte(st.Certificate))
	kb, _ := pem.Decode([]byte(st.Key))
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("the stored sandbox CA is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the sandbox CA's certificate: %w", err)
	}
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the sandbox CA's key: %w", err)
	}
	return &ca{cert: cert, key: key, pem: []byte(st.Certificate)}, nil
}

// serialNumber is a random 128-bit serial number.
func serialNumber() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	return n
}

// issue signs a certificate for pub from tmpl, returning it in PEM.
func (c *ca) issue(tmpl *x509.Certificate, pub any) (*x509.Certificate, []byte, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing a certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the signed certificate: %w", err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// serverCertificate is a new certificate of the TLS listener for hosts (names or IP addresses).
func (c *ca) serverCertificate(hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := rsa.GenerateKey(rand.Reader, caKeyBits)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the TLS listener's key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(),
		Subject:      pkix.Name{Organization: []string{"Kyma Sandbox"}, CommonName: "Kyma Sandbox TLS listener"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(caLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	cert, _, err := c.issue(tmpl, &key.PublicKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{cert.Raw, c.cert.Raw}, PrivateKey: key, Leaf: cert}, nil
}
