package runtimeagent

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
)

// Keys of the certificate Secrets (as the Compass Runtime Agent writes them).
const (
	secretKeyCertificate = "crt"    // client certificate followed by the chain, PEM
	secretKeyPrivateKey  = "key"    // the client key, PKCS #1 PEM
	secretKeyCA          = "cacert" // the Connector's CA, PEM
)

// ClientCredentials are the agent's client certificate, its key and the Connector's CA.
type ClientCredentials struct {
	// CertificateChain is the client certificate followed by its chain, PEM.
	CertificateChain []byte
	PrivateKey       []byte
	CACertificate    []byte
}

// newKeyAndCSR makes a new RSA key of bits and a CSR with exactly the subject the Connector
// handed out.
func newKeyAndCSR(ctx context.Context, subject string, bits int) (keyPEM, csrPEM []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	key, err := connector.NewKey(bits)
	if err != nil {
		return nil, nil, err
	}
	csrPEM, err = connector.NewCSR(subject, key)
	if err != nil {
		return nil, nil, err
	}
	return connector.KeyPEM(key), csrPEM, nil
}

// needsRenewal: less than threshold of the certificate's lifetime remains at now.
func needsRenewal(cert *x509.Certificate, threshold float64, now time.Time) bool {
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Sub(now) < time.Duration(float64(lifetime)*threshold)
}
