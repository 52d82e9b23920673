package runtimeagent

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCSRHasExactlyTheSubject(t *testing.T) {
	subject := "O=Org,OU=Unit,L=City,ST=State,C=DE,CN=runtime-1"
	keyPEM, csrPEM, err := newKeyAndCSR(context.Background(), subject, 1024)
	require.NoError(t, err)
	block, _ := pem.Decode(csrPEM)
	require.NotNil(t, block)
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, csr.CheckSignature())
	want, err := connector.ParseSubject(subject)
	require.NoError(t, err)
	assert.Equal(t, want.String(), csr.Subject.String())
	keyBlock, _ := pem.Decode(keyPEM)
	require.NotNil(t, keyBlock)
	key, err := x509.ParsePKCS1PrivateKey(keyBlock.Bytes)
	require.NoError(t, err)
	assert.Equal(t, 1024, key.N.BitLen())
	assert.True(t, key.PublicKey.Equal(csr.PublicKey))
}

func TestNeedsRenewal(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := &x509.Certificate{NotBefore: start, NotAfter: start.Add(100 * time.Second)}
	assert.False(t, needsRenewal(cert, 0.3, start.Add(69*time.Second)))
	assert.True(t, needsRenewal(cert, 0.3, start.Add(71*time.Second)))
	assert.True(t, needsRenewal(cert, 0.3, start.Add(101*time.Second)))
}
