package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func capture(t *testing.T) (*logrus.Logger, *bytes.Buffer) {
	t.Helper()
	log, err := logging.New(logging.Config{Format: "json", Level: "debug"})
	require.NoError(t, err)
	var buf bytes.Buffer
	log.SetOutput(&buf)
	return log, &buf
}

// A refused provisioning logged its whole request, sm_operator_credentials.clientsecret included.
func TestSecretsAreRedactedAtAnyDepth(t *testing.T) {
	log, buf := capture(t)
	details := domain.ProvisionDetails{
		ServiceID: "svc", PlanID: "plan",
		RawContext:    json.RawMessage(`{"globalaccount_id":"ga","sm_operator_credentials":{"clientid":"cid","clientsecret":"s3cr3t-ctx"}}`),
		RawParameters: json.RawMessage(`{"name":"rt","oidc":{"clientID":"c","password":"s3cr3t-pw"}}`),
	}
	log.WithFields(logrus.Fields{
		"instance-details": details, "password": "s3cr3t-field", "kubeconfig": "apiVersion: v1",
		"nested":    map[string]any{"list": []any{map[string]any{"access_token": "s3cr3t-token"}}},
		"as-string": `{"client_secret":"s3cr3t-string"}`,
	}).Warn("provision refused")
	out := buf.String()
	assert.NotContains(t, out, "s3cr3t")
	assert.NotContains(t, out, "apiVersion")
	assert.Contains(t, out, "globalaccount_id", "what is not secret stays")
	assert.Contains(t, out, logging.Redacted)
}

// A refused 10 MB body was copied whole into the log.
func TestLinesAreBounded(t *testing.T) {
	log, buf := capture(t)
	huge := strings.Repeat("x", 10<<20)
	log.WithField("body", huge).WithField("raw", json.RawMessage(`{"pad":"`+huge+`"}`)).WithError(errors.New(huge)).Error(huge)
	assert.Less(t, buf.Len(), 4*logging.MaxFieldBytes+logging.MaxMessageBytes+1024, "one line stays small")
	assert.Contains(t, buf.String(), "more bytes")
}

func TestConfig(t *testing.T) {
	_, err := logging.New(logging.Config{Format: "xml"})
	assert.ErrorContains(t, err, "APP_LOG_FORMAT")
	_, err = logging.New(logging.Config{Level: "loud"})
	assert.ErrorContains(t, err, "APP_LOG_LEVEL")
	log, err := logging.New(logging.Config{Format: "text", Level: "warn"})
	require.NoError(t, err)
	assert.Equal(t, logrus.WarnLevel, log.Level)
}
