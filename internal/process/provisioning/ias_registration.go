package provisioning

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/sirupsen/logrus"
)

// IASRegistration registers the runtime as a service provider in IAS, generates its OIDC client
// secret and gives both to Grafana through the monitoring component's overrides.
type IASRegistration struct{ Deps }

func (IASRegistration) Name() string { return "IAS_Registration" }

// ServiceProviderName is the name of an instance's IAS service provider.
func ServiceProviderName(instanceID string) string { return "kyma-runtime-" + instanceID }

// Grafana's generic OAuth settings (component monitoring).
const (
	MonitoringComponent  = "monitoring"
	GrafanaClientIDKey   = "grafana.env.GF_AUTH_GENERIC_OAUTH_CLIENT_ID"
	GrafanaClientSecretK = "grafana.env.GF_AUTH_GENERIC_OAUTH_CLIENT_SECRET"
)

func (s IASRegistration) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	if op.Data.Resources.IASServiceProviderID == "" {
		sp, err := s.Systems.IAS.CreateServiceProvider(ctx, ServiceProviderName(op.InstanceID))
		if err != nil {
			wait, err := s.Systems.Retry(&op, "IAS", "registering the service provider", err, s.PollInterval)
			return op, wait, err
		}
		op.Data.Resources.IASServiceProviderID = sp.ID
		log.WithField("service_provider_id", sp.ID).Info("IAS service provider registered")
		// Store the ID before generating a secret: every generation adds a secret in IAS.
		return op, time.Millisecond, nil
	}
	if op.Data.Resources.IASClientID != "" {
		return op, 0, nil
	}
	clientID, secret, err := s.Systems.IAS.GenerateSecret(ctx, op.Data.Resources.IASServiceProviderID)
	if err != nil {
		wait, err := s.Systems.Retry(&op, "IAS", "generating the client secret", err, s.PollInterval)
		return op, wait, err
	}
	op.Data.Overrides.Set(&op.Secrets, MonitoringComponent,
		overrides.Entry{Key: GrafanaClientIDKey, Value: clientID},
		overrides.Entry{Key: GrafanaClientSecretK, Value: secret, Secret: true})
	op.Data.Resources.IASClientID, op.LastError = clientID, ""
	return op, 0, nil
}
