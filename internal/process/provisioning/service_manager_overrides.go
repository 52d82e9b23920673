package provisioning

import (
	"context"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/sirupsen/logrus"
)

// ServiceManagerOverrides gives the Service Manager proxy component the credentials it connects the
// runtime to the Service Manager with.
type ServiceManagerOverrides struct{ Deps }

func (ServiceManagerOverrides) Name() string { return "ServiceManagerOverrides" }

// Overrides of the Service Manager proxy.
const (
	SMProxyComponent  = "service-manager-proxy"
	SMURLKey          = "config.sm.url"
	SMTokenURLKey     = "sm.user.tokenURL"
	SMClientIDKey     = "sm.user.clientID"
	SMClientSecretKey = "sm.user.clientSecret"
)

func (s ServiceManagerOverrides) Run(_ context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	creds, ok := s.Systems.SMCredentials(op.Secrets)
	if !ok {
		return op, 0, nil
	}
	op.Data.Overrides.Set(&op.Secrets, SMProxyComponent,
		overrides.Entry{Key: SMURLKey, Value: creds.URL},
		overrides.Entry{Key: SMTokenURLKey, Value: creds.TokenURL},
		overrides.Entry{Key: SMClientIDKey, Value: creds.ClientID, Secret: true},
		overrides.Entry{Key: SMClientSecretKey, Value: creds.ClientSecret, Secret: true})
	return op, 0, nil
}
