package health_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/health"
	"github.com/stretchr/testify/assert"
)

func TestWithRetryAfterMarksOnly503s(t *testing.T) {
	for status, want := range map[int]string{http.StatusServiceUnavailable: "5", http.StatusInternalServerError: "", http.StatusOK: ""} {
		h := health.WithRetryAfter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, status, rec.Code)
		assert.Equal(t, want, rec.Header().Get("Retry-After"), "status %d", status)
	}
	// A handler's own Retry-After is kept.
	h := health.WithRetryAfter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, "60", rec.Header().Get("Retry-After"))
}
