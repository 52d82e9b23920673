package infrastructure_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
)

func kubeconfigWith(t *testing.T, user *clientcmdapi.AuthInfo) string {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["u"] = user
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	b, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return string(b)
}

func TestKubeconfigValidity(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	end := start.Add(time.Hour)

	// Gardener's admin kubeconfigs: a client certificate.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "admin"}, NotBefore: start, NotAfter: end}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert := kubeconfigWith(t, &clientcmdapi.AuthInfo{ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})})
	nb, na, ok := infrastructure.KubeconfigValidity(cert)
	require.True(t, ok)
	assert.True(t, nb.Equal(start) && na.Equal(end), "%v %v", nb, na)

	// ServiceAccount tokens: the JWT's iat and exp.
	claims := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"iat": %d, "exp": %d}`, start.Unix(), end.Unix())))
	token := kubeconfigWith(t, &clientcmdapi.AuthInfo{Token: "e30." + claims + ".sig"})
	nb, na, ok = infrastructure.KubeconfigValidity(token)
	require.True(t, ok)
	assert.True(t, nb.Equal(start) && na.Equal(end))

	for _, kc := range []string{cert, token} {
		assert.False(t, infrastructure.KubeconfigDue(kc, start.Add(39*time.Minute)))
		assert.True(t, infrastructure.KubeconfigDue(kc, start.Add(40*time.Minute)), "two thirds of an hour")
	}

	// A static token, or no kubeconfig: validity unknown, so due.
	static := kubeconfigWith(t, &clientcmdapi.AuthInfo{Token: "0123456789abcdef"})
	_, _, ok = infrastructure.KubeconfigValidity(static)
	assert.False(t, ok)
	assert.True(t, infrastructure.KubeconfigDue(static, start))
	assert.True(t, infrastructure.KubeconfigDue("not a kubeconfig", start))
}
