package provisioning

import (
	"context"
	"net/url"
	"time"

	"github.com/sirupsen/logrus"
)

// IASType makes the runtime's IAS service provider an OpenID Connect application whose redirect
// URI is the runtime's Grafana, known once the runtime has a domain.
type IASType struct{ Deps }

func (IASType) Name() string { return "IAS_Type" }

func (s IASType) Run(ctx context.Context, op Op, _ logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	if res.IASOIDCConfigured || res.IASServiceProviderID == "" {
		return op, 0, nil
	}
	if err := s.Systems.IAS.ConfigureOIDC(ctx, res.IASServiceProviderID, []string{GrafanaRedirectURI(op.Data.ShootDomain, s.Defaults.DashboardURL)}); err != nil {
		wait, err := s.Systems.Retry(&op, "IAS", "configuring OIDC", err, s.PollInterval)
		return op, wait, err
	}
	res.IASOIDCConfigured, op.LastError = true, ""
	return op, 0, nil
}

// GrafanaRedirectURI is Grafana's OAuth callback in the runtime's domain; without one (no
// Director), the dashboard's host stands in.
func GrafanaRedirectURI(domain, dashboardURL string) string {
	if domain == "" {
		if u, err := url.Parse(dashboardURL); err == nil {
			domain = u.Host
		}
	}
	return "https://grafana." + domain + "/login/generic_oauth"
}
