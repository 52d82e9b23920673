package client_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/api"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
)

// TestContract runs the provisioner's contract against both clients of the real service.
func TestContract(t *testing.T) {
	t.Run("InProcess", func(t *testing.T) {
		contracttest.Run(t, func(t *testing.T) client.Client {
			return client.NewInProcess(provisionertest.NewService(t))
		})
	})
	t.Run("GraphQL", func(t *testing.T) {
		contracttest.Run(t, func(t *testing.T) client.Client {
			srv := httptest.NewServer(api.NewHandler(provisionertest.NewService(t), api.Config{}, testLogger(t)))
			t.Cleanup(srv.Close)
			return client.NewGraphQL(srv.URL+api.DefaultEndpoint, srv.Client())
		})
	})
}

// testLogger logs to the test's log, so that the API's internal errors show with a failure.
func testLogger(t *testing.T) logrus.FieldLogger {
	log := logrus.New()
	log.SetOutput(testWriter{t})
	return log
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
