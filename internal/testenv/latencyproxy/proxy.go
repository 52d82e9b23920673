// Package latencyproxy is a TCP proxy for tests that delays every chunk of data it forwards, in
// both directions: a slow network to a real server (PostgreSQL), as tc netem would make it
// without root.
package latencyproxy

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards connections from Addr to a target, each chunk delayed by the current latency.
type Proxy struct {
	Addr    string
	target  string
	ln      net.Listener
	latency atomic.Int64
	// turns counts round trips: client chunks that follow an answer (or open a connection).
	turns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Start listens on a loopback port and forwards to target (host:port) until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("latency proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// ForURL starts a proxy to the host of a URL (a database's) and returns the URL through it.
func ForURL(t testing.TB, raw string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("latency proxy: parsing the target URL: %v", err)
	}
	p := Start(t, u.Host)
	u.Host = p.Addr
	return p, u.String()
}

// SetLatency sets the delay of every chunk from now on.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// RoundTrips is how many round trips the clients have made since the proxy started: on each
// connection, every chunk from the client that follows the server's answer (or is the first)
// starts one, however the client's and server's writes are cut into chunks.
func (p *Proxy) RoundTrips() int64 { return p.turns.Load() }

// Close stops listening and ends every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.track(in)
		p.track(out)
		// clientSpoke: the last chunk on this connection came from the client.
		var clientSpoke atomic.Bool
		p.wg.Add(2)
		go p.pipe(out, in, func() {
			if !clientSpoke.Swap(true) {
				p.turns.Add(1)
			}
		})
		go p.pipe(in, out, func() { clientSpoke.Store(false) })
	}
}

// pipe copies from src to dst, each chunk after the latency, and closes both at the end.
// onChunk runs as each chunk is read.
func (p *Proxy) pipe(dst, src net.Conn, onChunk func()) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			onChunk()
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}
