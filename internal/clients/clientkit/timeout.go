package clientkit

import (
	"context"
	"io"
	"net/http"
	"time"
)

// requestTimeout bounds each request it sends, its answer's body included, by d through the
// request's context. http.Client.Timeout does the same with a timer and a goroutine of its own
// per request (and a second context), a visible share of the clients' side of a call at the
// dozens of external calls a provisioning makes.
type requestTimeout struct {
	next http.RoundTripper
	d    time.Duration
}

func (t requestTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.d)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends the request's context when its answer's body is closed: until then the
// body is read within the timeout.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc // safe to call more than once
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
