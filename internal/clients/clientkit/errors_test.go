package clientkit

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/oauth2"
)

func TestClassify(t *testing.T) {
	for code, want := range map[int]bool{400: false, 401: false, 403: false, 404: false, 409: false, 429: true, 500: true, 502: true, 503: true} {
		temp, status := Classify(&StatusError{Code: code})
		assert.Equal(t, want, temp, code)
		assert.Equal(t, code, status)
		temp, _ = Classify(&oauth2.RetrieveError{Response: &http.Response{StatusCode: code}})
		assert.Equal(t, want, temp, "token endpoint %d", code)
	}
	temp, _ := Classify(&oauth2.RetrieveError{})
	assert.True(t, temp, "token endpoint unreachable")
	temp, _ = Classify(Permanent(errors.New("bad json")))
	assert.False(t, temp)
	temp, _ = Classify(fmt.Errorf("looking up: %w", Permanent(errors.New("bad json"))))
	assert.False(t, temp, "wrapped")
	temp, _ = Classify(errors.New("connection reset by peer"))
	assert.True(t, temp)
}

func TestErrorHelpers(t *testing.T) {
	notFound := fmt.Errorf("outer: %w", &Error{Op: "getting x", StatusCode: 404, Attempts: 1, Err: &StatusError{Code: 404}})
	assert.True(t, IsNotFound(notFound))
	assert.False(t, IsTemporary(notFound))
	assert.EqualError(t, errors.Unwrap(notFound), "getting x: permanent failure after 1 attempt(s): HTTP 404")
	busy := &Error{Op: "getting x", StatusCode: 503, Temporary: true, Attempts: 3, Err: &StatusError{Code: 503, Body: "busy"}}
	assert.True(t, IsTemporary(busy))
	assert.False(t, IsNotFound(busy))
	assert.EqualError(t, busy, "getting x: temporary failure after 3 attempt(s): HTTP 503: busy")
	assert.False(t, IsTemporary(errors.New("plain")))
	assert.False(t, IsNotFound(&StatusError{Code: 404}), "only an *Error counts")

	assert.Equal(t, 404, StatusOf(fmt.Errorf("x: %w", &StatusError{Code: 404})))
	assert.Equal(t, 0, StatusOf(errors.New("plain")))
	assert.NoError(t, IgnoreNotFound(&StatusError{Code: 404}))
	assert.Error(t, IgnoreNotFound(&StatusError{Code: 409}))
}

func TestNewStatusError(t *testing.T) {
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"7"}}}
	body := make([]byte, 1000)
	for i := range body {
		body[i] = 'a'
	}
	e := NewStatusError(resp, body)
	assert.Equal(t, 429, e.Code)
	assert.Len(t, e.Body, 512)
	assert.Equal(t, "7s", e.RetryAfter.String())
	e = NewStatusError(&http.Response{StatusCode: 500, Header: http.Header{"Retry-After": {"Wed, 21 Oct 2015 07:28:00 GMT"}}}, nil)
	assert.Zero(t, e.RetryAfter)
	assert.EqualError(t, e, "HTTP 500")
}
