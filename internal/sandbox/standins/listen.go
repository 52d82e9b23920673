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
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/httpguard"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
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
	// release gives up the store's claim, once every request is done.
	release     func()
	releaseOnce sync.Once
}

// claim takes o.Store for this sandbox, waiting up to o.ClaimWait for another to give it up: the
// stand-ins cache what they read and learn only their own writes, so two sandboxes on one
// database would be two diverging services (a runtime registered through one not found through
// the other) where the real ones are one each.
func claim(ctx context.Context, o Options) (func(), error) {
	c, ok := o.Store.(durable.Claimer)
	if !ok {
		return func() {}, nil
	}
	wait := o.ClaimWait
	if wait <= 0 {
		wait = DefaultClaimWait
	}
	deadline := time.Now().Add(wait)
	logged := false
	for {
		release, ok, err := c.TryClaim(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return release, nil
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("starting the sandbox (waited %s): %w", wait, ErrStoreClaimed)
		}
		if !logged && o.Log != nil {
			o.Log.WithField("wait", wait.String()).Warn(waitingForClaim)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("starting the sandbox: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitingForClaim is logged once when Listen finds another sandbox serving from the store.
const waitingForClaim = "another sandbox serves from this database; waiting for it to stop"

// Listen listens on httpAddr and tlsAddr (host:port, port 0 for any), opens the stand-ins with
// their URLs on the TLS listener's address, and serves them until Shutdown. A listener bound to
// every interface is advertised as localhost. Beyond loopback, the /_sandbox/ endpoints need
// credentials (o.Admin).
func Listen(ctx context.Context, o Options, httpAddr, tlsAddr string) (*Listeners, error) {
	if err := o.Admin.Check(httpAddr, tlsAddr); err != nil {
		return nil, err
	}
	release, err := claim(ctx, o)
	if err != nil {
		return nil, err
	}
	plain, err := net.Listen("tcp", httpAddr)
	if err != nil {
		release()
		return nil, fmt.Errorf("listening on %s: %w", httpAddr, err)
	}
	secure, err := net.Listen("tcp", tlsAddr)
	if err != nil {
		_ = plain.Close()
		release()
		return nil, fmt.Errorf("listening for TLS on %s: %w", tlsAddr, err)
	}
	closeBoth := func() { _ = plain.Close(); _ = secure.Close(); release() }
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
		TLSCertificate: cfg.Certificates[0].Leaf, release: release}
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
	if err := errors.Join(errs...); err != nil {
		// Requests may still be writing: the claim goes with the process.
		return err
	}
	if l.release != nil {
		l.releaseOnce.Do(l.release)
	}
	return nil
}
