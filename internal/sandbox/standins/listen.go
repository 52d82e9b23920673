package standins

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/httpguard"
)

// Listeners are the sandbox's two listeners: plain HTTP for the broker's clients, and TLS
// (a server certificate of the sandbox CA; client certificates verified against it when given)
// for the Connector and the Director's runtime endpoints secured by mutual TLS. Both serve every
// stand-in and the /_sandbox/ endpoints.
type Listeners struct {
	Systems
	// URL is the plain HTTP listener's base URL (http://host:port).
	URL string
	// TLSAddr is the TLS listener's address.
	TLSAddr net.Addr
	// TLSCertificate is the TLS listener's certificate (its expiry is exported).
	TLSCertificate *x509.Certificate

	servers []*http.Server
	errc    chan error
	// The in-process transport's requests (Transport): refused and waited for by Shutdown
	// like the listeners'.
	gate gate
}

// Listen listens on httpAddr and tlsAddr (host:port, port 0 for any), opens the stand-ins with
// their URLs on the TLS listener's address, and serves them until Shutdown. A listener bound to
// every interface is advertised as localhost. Beyond loopback, the /_sandbox/ endpoints need
// credentials (o.Admin).
func Listen(ctx context.Context, o Options, httpAddr, tlsAddr string) (*Listeners, error) {
	if err := o.Admin.Check(httpAddr, tlsAddr); err != nil {
		return nil, err
	}
	plain, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", httpAddr, err)
	}
	secure, err := net.Listen("tcp", tlsAddr)
	if err != nil {
		_ = plain.Close()
		return nil, fmt.Errorf("listening for TLS on %s: %w", tlsAddr, err)
	}
	closeBoth := func() { _ = plain.Close(); _ = secure.Close() }
	host, port, _ := net.SplitHostPort(secure.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	o.TLSURL = "https://" + net.JoinHostPort(host, port)
	sys, err := OpenSystems(ctx, o)
	if err != nil {
		closeBoth()
		return nil, err
	}
	cfg, err := sys.Connector.TLSConfig(serverHosts(host))
	if err != nil {
		closeBoth()
		return nil, fmt.Errorf("configuring the TLS listener: %w", err)
	}
	limits := o.Timeouts.withDefaults()
	l := &Listeners{Systems: sys, URL: "http://" + plain.Addr().String(), TLSAddr: secure.Addr(), errc: make(chan error, 2),
		TLSCertificate: cfg.Certificates[0].Leaf}
	for _, srv := range []struct {
		ln  net.Listener
		tls *tls.Config
	}{{plain, nil}, {tls.NewListener(secure, cfg), cfg}} {
		s := &http.Server{Handler: httpguard.Handler(sys.Sandbox, nil), TLSConfig: srv.tls,
			ReadHeaderTimeout: limits.ReadHeader, ReadTimeout: limits.Read, IdleTimeout: limits.Idle}
		l.servers = append(l.servers, s)
		go func(ln net.Listener) { l.errc <- s.Serve(ln) }(srv.ln)
	}
	return l, nil
}

// serverHosts are the names the TLS listener's certificate is valid for.
func serverHosts(host string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	for _, h := range hosts {
		if strings.EqualFold(h, host) {
			return hosts
		}
	}
	return append(hosts, host)
}

// CAPEM is the sandbox CA's certificate in PEM: trust it to call the TLS listener.
func (l *Listeners) CAPEM() []byte { return l.Connector.CAPEM() }

// CAPool is a pool holding the sandbox CA.
func (l *Listeners) CAPool() *x509.CertPool { return l.Connector.CAPool() }

// Err receives what each listener's Serve returned: an error when one stops serving on its own,
// http.ErrServerClosed after Shutdown.
func (l *Listeners) Err() <-chan error { return l.errc }

// Shutdown stops both listeners, waiting within ctx for the requests in flight.
func (l *Listeners) Shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range l.servers {
		errs = append(errs, s.Shutdown(ctx))
	}
	select {
	case <-l.gate.close():
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("waiting for the in-process requests: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}
