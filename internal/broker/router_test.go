package broker

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Request lines are debug: at info only failures of ours are written.
func TestRequestLogLevels(t *testing.T) {
	for _, tc := range []struct {
		level  logrus.Level
		status int
		want   []logrus.Level
	}{
		{logrus.InfoLevel, http.StatusOK, nil},
		{logrus.InfoLevel, http.StatusNotFound, nil},
		{logrus.InfoLevel, http.StatusServiceUnavailable, []logrus.Level{logrus.WarnLevel}},
		{logrus.DebugLevel, http.StatusOK, []logrus.Level{logrus.DebugLevel}},
	} {
		log, hook := logtest.NewNullLogger()
		log.SetLevel(tc.level)
		h := RequestLog(log.WithField("component", "test"))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tc.status)
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v2/catalog", nil))
		var got []logrus.Level
		for _, e := range hook.AllEntries() {
			got = append(got, e.Level)
			assert.Equal(t, tc.status, e.Data["status"])
			assert.NotEmpty(t, e.Data["request_id"])
		}
		require.Equal(t, tc.want, got, "level %s, status %d", tc.level, tc.status)
	}
}
