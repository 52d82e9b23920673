package observe_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/observe"
)

func selfSigned(t *testing.T, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert
}

// expiries gathers the gauge: certificate label -> value.
func expiries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != observe.CertificateExpiryMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			require.Len(t, m.GetLabel(), 1)
			require.Equal(t, "certificate", m.GetLabel()[0].GetName(), "the label the chart's alert groups by")
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The gauge is each purpose's first expiry, read at every scrape (a rotation shows at once), and
// absent for a purpose that holds no certificate now; a name that looks like an ID is refused.
func TestCertificateExpiry(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := observe.NewCertificateExpiry(reg)
	require.NoError(t, err)
	assert.Empty(t, expiries(t, reg))

	soon, later := time.Now().Add(10*24*time.Hour).Truncate(time.Second), time.Now().Add(365*24*time.Hour).Truncate(time.Second)
	chain := []*x509.Certificate{selfSigned(t, later), selfSigned(t, soon)}
	var current atomic.Pointer[x509.Certificate]
	current.Store(selfSigned(t, soon))
	require.NoError(t, c.Watch("connector-chain", func() []*x509.Certificate { return chain }))
	require.NoError(t, c.Watch("serving-tls", func() []*x509.Certificate { return []*x509.Certificate{current.Load()} }))
	require.NoError(t, c.Watch("not-configured", func() []*x509.Certificate { return nil }))

	assert.Equal(t, map[string]float64{"connector-chain": float64(soon.Unix()), "serving-tls": float64(soon.Unix())}, expiries(t, reg))
	current.Store(selfSigned(t, later))
	assert.Equal(t, float64(later.Unix()), expiries(t, reg)["serving-tls"], "the rotated certificate")

	for _, bad := range []string{"", "Serving", "runtime 1", "runtime-3f2a9c1d-77aa-4b1e-9c2d-0a1b2c3d4e5f", "a1b2c3d4e5f6", "x-" + string(make([]byte, 60))} {
		assert.Error(t, c.Watch(bad, func() []*x509.Certificate { return chain }), "%q", bad)
	}
	var none *observe.CertificateExpiry
	assert.NoError(t, none.Watch("sandbox-tls", nil), "a process without the metric watches nothing")
}
