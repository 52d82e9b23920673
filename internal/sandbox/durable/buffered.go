package durable

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// BufferedResponse is an http.ResponseWriter that keeps the whole answer (the stand-ins'
// answers are small) until it is handed on: to the client's connection once a stand-in's
// changes are written (Durable.Handler), or as an *http.Response to a client in process (whose
// BufferedResponse Durable.Handler then writes to directly).
type BufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// NewBufferedResponse returns an empty BufferedResponse.
func NewBufferedResponse() *BufferedResponse { return &BufferedResponse{header: http.Header{}} }

func (b *BufferedResponse) Header() http.Header { return b.header }

// Reset forgets everything written so far: headers, status and body.
func (b *BufferedResponse) Reset() {
	b.header, b.status = http.Header{}, 0
	b.body.Reset()
}

// WriteHeader keeps the first status, as a server does.
func (b *BufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *BufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

func (b *BufferedResponse) statusOrOK() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// CopyTo writes the answer to w.
func (b *BufferedResponse) CopyTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.statusOrOK())
	_, _ = w.Write(b.body.Bytes())
}

// Response is the answer as a client receives it for req: the status line, the headers a
// server adds (Content-Length, a sniffed Content-Type), and no body for HEAD.
func (b *BufferedResponse) Response(req *http.Request) *http.Response {
	status := b.statusOrOK()
	if b.header.Get("Content-Type") == "" && b.body.Len() > 0 {
		b.header.Set("Content-Type", http.DetectContentType(b.body.Bytes()))
	}
	var body io.ReadCloser = http.NoBody
	length := int64(b.body.Len())
	if req.Method != http.MethodHead && length > 0 {
		body = io.NopCloser(&b.body)
	}
	b.header.Set("Content-Length", strconv.FormatInt(length, 10))
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: b.header, Body: body, ContentLength: length, Request: req,
	}
}
