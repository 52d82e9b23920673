package runtimeagent

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSubject(t *testing.T) {
	name, err := ParseSubject(`O=Org\, Inc.,OU=OrgUnit,L=Waldorf,ST=Waldorf,C=DE,CN=1ae04041-17e5-478f-91f8-3a2ddc7700de`)
	require.NoError(t, err)
	assert.Equal(t, []string{"Org, Inc."}, name.Organization)
	assert.Equal(t, []string{"OrgUnit"}, name.OrganizationalUnit)
	assert.Equal(t, []string{"Waldorf"}, name.Locality)
	assert.Equal(t, []string{"Waldorf"}, name.Province)
	assert.Equal(t, []string{"DE"}, name.Country)
	assert.Equal(t, "1ae04041-17e5-478f-91f8-3a2ddc7700de", name.CommonName)

	for _, bad := range []string{"", "O=Org", "O=Org,CN", "X=1,CN=a", `CN=a\`} {
		_, err := ParseSubject(bad)
		assert.Error(t, err, bad)
	}
}

func TestCSRHasExactlyTheSubject(t *testing.T) {
	subject := "O=Org,OU=Unit,L=City,ST=State,C=DE,CN=runtime-1"
	keyPEM, csrPEM, err := newKeyAndCSR(context.Background(), subject, 1024)
	require.NoError(t, err)
	block, _ := pem.Decode(csrPEM)
	require.NotNil(t, block)
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, csr.CheckSignature())
	want, _ := ParseSubject(subject)
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
