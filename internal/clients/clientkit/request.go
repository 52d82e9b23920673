package clientkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/kyma-project/kyma-environment-broker/internal/httpbody"
)

// maxResponse bounds how much of a response body is read.
const maxResponse = 8 << 20

// DoJSON makes one request to base+path?query, authorize setting its credentials; in and out are
// JSON bodies, either may be nil. A non-2xx answer is a *StatusError, an unencodable request or an
// undecodable answer a permanent failure. It returns the response, whose body is already read and
// closed, on a 2xx answer.
func DoJSON(ctx context.Context, httpc *http.Client, authorize func(*http.Request), method, base, path string, query url.Values, in, out any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, Permanent(fmt.Errorf("encoding request: %w", err))
		}
		body = bytes.NewReader(b)
	}
	u := base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, Permanent(err)
	}
	authorize(req)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := checkHeader(req.Header); err != nil {
		return nil, Permanent(err)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	NoteAnswer(ctx, resp.StatusCode)
	data, err := httpbody.Read(io.LimitReader(resp.Body, maxResponse), resp.ContentLength, maxResponse)
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, NewStatusError(resp, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, Permanent(fmt.Errorf("decoding %s %s response: %w", method, path, err))
		}
	}
	return resp, nil
}

// checkHeader reports a header the transport would refuse to send (a control character in a value,
// e.g. from a tenant or credential): a request that cannot be built, which no retry fixes. The
// transport's own error for it would pass for a network error.
func checkHeader(h http.Header) error {
	for name, values := range h {
		for _, v := range values {
			for i := 0; i < len(v); i++ {
				if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
					return fmt.Errorf("building the request: header %s has a control character (0x%02x)", name, c)
				}
			}
		}
	}
	return nil
}
