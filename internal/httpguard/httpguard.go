// Package httpguard refuses, in front of every route of a listener, what no handler can serve
// safely: a query that does not parse (400), and it closes the connections whose framing is
// ambiguous. It also lets a client that sent a body over the limit read the 413.
package httpguard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// DrainLimit bounds how much of a refused body is read and discarded after a 413, so that a
// client that writes its whole body before reading gets the answer rather than a connection
// reset (the server closing with unread data makes the kernel send RST). Beyond it, or after
// the server's read timeout, the connection is closed anyway.
const DrainLimit = 16 << 20

// maxQueryParams is Go's own bound (net/url refuses more parameters and returns none).
const maxQueryParams = 10_000

// Handler guards next; a refused query is answered in OSB's form ({"description"}) on the paths
// osbPath (when set) reports, in the operator API's ({"error"}) elsewhere.
func Handler(next http.Handler, osbPath func(path string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if len(req.TransferEncoding) > 0 {
			// RFC 9112 6.1: a request with both Transfer-Encoding and Content-Length must be
			// answered and the connection closed. net/http drops the Content-Length before a
			// handler sees it, so every chunked request closes its connection (they are rare:
			// platforms send Content-Length).
			w.Header().Set("Connection", "close")
		}
		if err := CheckQuery(req.URL.RawQuery); err != nil {
			msg := "query: " + err.Error()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			field := "error"
			if osbPath != nil && osbPath(req.URL.Path) {
				field = "description"
			}
			_ = json.NewEncoder(w).Encode(map[string]string{field: msg})
			return
		}
		if req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody {
			next.ServeHTTP(w, req)
			return
		}
		body := req.Body
		rec := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(rec, req)
		if rec.status == http.StatusRequestEntityTooLarge && !strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			drain(w, body)
		}
	})
}

// drain sends the answer, then reads what the client still sends, up to DrainLimit. A client
// that expects 100-continue got its 413 before sending anything: nothing is read then.
func drain(w http.ResponseWriter, body io.Reader) {
	_ = http.NewResponseController(w).Flush()
	_, _ = io.CopyN(io.Discard, body, DrainLimit)
}

// CheckQuery reports why a raw query cannot be parsed: more parameters than net/url takes
// (it would silently return none, dropping every filter), a bad escape or a semicolon.
func CheckQuery(raw string) error {
	if raw == "" {
		return nil
	}
	// The common query has no escapes and few parameters: it parses.
	if !strings.ContainsAny(raw, "%;") && strings.Count(raw, "&") < maxQueryParams {
		return nil
	}
	if strings.Count(raw, "&")+1 > maxQueryParams {
		return errTooMany
	}
	_, err := url.ParseQuery(raw)
	return err
}

var errTooMany = queryError("more than 10000 parameters")

type queryError string

func (e queryError) Error() string { return string(e) }

// statusWriter records the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush keeps the writer a http.Flusher for the handlers that stream.
func (s *statusWriter) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
