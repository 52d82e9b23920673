package observe

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CertificateExpiryMetric is the gauge the chart's KEBCertificateExpiresSoon alert reads, by
// CertificateLabel.
const (
	CertificateExpiryMetric = "keb_certificate_expiry_timestamp_seconds"
	CertificateLabel        = "certificate"
)

// certificateName keeps the label a purpose ("sandbox-tls"), never an ID or a subject: lower
// case with dashes, and no run of hex digits as IDs have.
var (
	certificateName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,47}$`)
	idLike          = regexp.MustCompile(`[0-9a-f]{8,}`)
)

// CertificateExpiry exports when each certificate the process holds expires, as
// keb_certificate_expiry_timestamp_seconds{certificate="<purpose>"}. The certificates are read at
// every scrape, so a rotated one is seen at once.
type CertificateExpiry struct {
	desc *prometheus.Desc

	mu      sync.Mutex
	sources map[string]func() []*x509.Certificate
}

// NewCertificateExpiry registers the gauge (with no series until Watch).
func NewCertificateExpiry(reg prometheus.Registerer) (*CertificateExpiry, error) {
	c := &CertificateExpiry{
		desc: prometheus.NewDesc(CertificateExpiryMetric,
			"When a certificate the process holds expires (Unix seconds; of a chain, its first to expire), by its purpose.",
			[]string{CertificateLabel}, nil),
		sources: map[string]func() []*x509.Certificate{},
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registering %s: %w", CertificateExpiryMetric, err)
	}
	return c, nil
}

// Watch exports the certificates certs returns under name, a purpose in lower case with dashes
// (e.g. "sandbox-connector-ca"); of several, the first to expire counts. Watching a name again
// replaces its source.
func (c *CertificateExpiry) Watch(name string, certs func() []*x509.Certificate) error {
	if c == nil {
		return nil
	}
	if !certificateName.MatchString(name) || idLike.MatchString(name) {
		return fmt.Errorf("certificate metric name %q: must be a purpose in lower case with dashes", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources[name] = certs
	return nil
}

// Describe implements prometheus.Collector.
func (c *CertificateExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *CertificateExpiry) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, certs := range c.sources {
		var first time.Time
		for _, cert := range certs() {
			if cert != nil && (first.IsZero() || cert.NotAfter.Before(first)) {
				first = cert.NotAfter
			}
		}
		if first.IsZero() {
			continue // none held now: no series rather than a false expiry
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(first.Unix()), name)
	}
}
