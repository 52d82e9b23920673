package sandbox

import (
	"crypto/x509"
	"net/http"
)

// ClientCertificate returns the client certificate of a request that came over TLS with a
// certificate the listener verified (against the sandbox CA), for the stand-ins' endpoints secured
// by mutual TLS.
func ClientCertificate(r *http.Request) (*x509.Certificate, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, false
	}
	return r.TLS.VerifiedChains[0][0], true
}
