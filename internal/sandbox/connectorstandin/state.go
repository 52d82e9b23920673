package connectorstandin

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// The kinds of rows the stand-in keeps in its store: one per certificate it issued (key: its
// serial number in hex, a Table), the certificate lifetime and counters.
const (
	kindCertificate = "certificate"
	kindSettings    = "settings"
	kindSeq         = "seq"
	kindCalls       = "calls"

	keyLifetime     = "certificateLifetime"
	seqCertificates = "certificates"
)

func (s *StandIn) encode(kind, key string) (any, bool) {
	switch kind {
	case kindSettings:
		if key == keyLifetime && s.lifetime != 0 {
			return s.lifetime, true
		}
	}
	return nil, false
}

func (s *StandIn) restore(rows durable.Rows) error {
	s.lifetime = 0
	return durable.Each(rows, kindSettings, func(key string, d time.Duration) {
		if key == keyLifetime {
			s.lifetime = d
		}
	})
}
