package standins

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// ErrShutDown is what a request through the in-process transport gets once the sandbox is
// shut down, as a client of a closed listener gets a refused connection.
var ErrShutDown = errors.New("the sandbox is shut down")

// inProcess serves requests for the plain listener's address by calling the sandbox's handler
// in this process. The embedded broker's clients send dozens of requests a provisioning to
// the stand-ins; over loopback, each costs both ends a connection's writes, reads and HTTP
// framing, while the request and the answer the client sees are the same. Requests for any other address go to next.
type inProcess struct {
	host    string
	handler http.Handler
	next    http.RoundTripper
	gate    *gate
}

// gate lets Shutdown refuse new in-process requests and wait for those being served, as
// http.Server.Shutdown does for a listener's.
type gate struct {
	mu     sync.Mutex
	closed bool
	n      int
	idle   chan struct{}
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// close refuses new requests; the channel is closed once none is being served.
func (g *gate) close() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	idle := make(chan struct{})
	if g.n == 0 {
		close(idle)
	} else {
		g.idle = idle
	}
	return idle
}

// Transport returns a transport that serves requests for the plain listener (URL) in process,
// and sends any other request through next.
func (l *Listeners) Transport(next http.RoundTripper) http.RoundTripper {
	return inProcess{host: strings.TrimPrefix(l.URL, "http://"), handler: l.Sandbox, next: next, gate: &l.gate}
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || req.URL.Host != t.host {
		return t.next.RoundTrip(req)
	}
	if !t.gate.enter() {
		closeBody(req)
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL, ErrShutDown)
	}
	ctx := req.Context()
	// The request as the server would parse it: a URL of path and query only, the Host header,
	// the protocol the client's transport speaks.
	in := req.Clone(ctx)
	in.RequestURI, in.Host, in.RemoteAddr = req.URL.RequestURI(), req.URL.Host, "in-process"
	in.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	if in.Body == nil {
		in.Body = http.NoBody
	}
	w := durable.NewBufferedResponse()
	done := make(chan any, 1)
	go func() {
		defer t.gate.leave()
		defer closeBody(in) // as the server closes a request's body after its handler
		defer func() { done <- recover() }()
		t.handler.ServeHTTP(w, in)
	}()
	// A stand-in told never to answer blocks until the request's context ends; the client
	// gets what a client of the listener would, its context's error.
	select {
	case p := <-done:
		if p != nil {
			// net/http's server logs a handler's panic and drops the connection.
			return nil, fmt.Errorf("%s %s: the sandbox's handler panicked: %v", req.Method, req.URL, p)
		}
	case <-ctx.Done():
		// Unwrapped, as http.Transport returns it: url.Error asks the error itself whether it
		// is a timeout.
		return nil, context.Cause(ctx)
	}
	return w.Response(req), nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
