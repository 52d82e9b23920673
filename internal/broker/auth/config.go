package auth

import (
	"errors"
	"strings"
)

// Defaults for Config.
const (
	DefaultScope      = "broker:write"
	DefaultAdminGroup = "runtimeAdmin"
)

// Config is the broker's authentication configuration. Read it with
// envconfig.Process("APP", &cfg), so the variables are APP_BROKER_USERNAME,
// APP_BROKER_PASSWORD, APP_BROKER_OIDC_ISSUER and so on.
type Config struct {
	// Username and Password guard /v2 with HTTP basic auth. Both are required
	// wherever basic auth is mounted (NewBasic refuses empty ones).
	Username string `envconfig:"BROKER_USERNAME"`
	Password string `envconfig:"BROKER_PASSWORD"`

	// OIDCIssuer is the exact "iss" every bearer token must carry. Empty
	// disables bearer auth (NewVerifier refuses to build).
	OIDCIssuer string `envconfig:"BROKER_OIDC_ISSUER"`
	// OIDCJWKSURL is where the signing keys are read. Empty: discovered from
	// <issuer>/.well-known/openid-configuration (jwks_uri).
	OIDCJWKSURL string `envconfig:"BROKER_OIDC_JWKS_URL"`
	// OIDCAudience must be one of the token's "aud" values. Required when
	// bearer auth is used.
	OIDCAudience string `envconfig:"BROKER_OIDC_AUDIENCE"`
	// OIDCScope is the scope the OSB routes under /oauth require.
	OIDCScope string `envconfig:"BROKER_OIDC_SCOPE" default:"broker:write"`
	// OIDCAdminGroup is the group (claim "groups") the operator endpoints require.
	OIDCAdminGroup string `envconfig:"BROKER_OIDC_ADMIN_GROUP" default:"runtimeAdmin"`

	// AllowBasicOnOAuth accepts the basic credentials on /oauth routes too
	// (for the embedded default). Wire with Either(basic, bearer).
	AllowBasicOnOAuth bool `envconfig:"BROKER_ALLOW_BASIC_ON_OAUTH" default:"false"`
}

// BasicEnabled reports whether basic credentials are configured.
func (c Config) BasicEnabled() bool {
	return c.Username != "" && c.Password != ""
}

// OIDCEnabled reports whether an OIDC issuer is configured.
func (c Config) OIDCEnabled() bool {
	return strings.TrimSpace(c.OIDCIssuer) != ""
}

// Scope returns OIDCScope or DefaultScope when it is empty.
func (c Config) Scope() string {
	if s := strings.TrimSpace(c.OIDCScope); s != "" {
		return s
	}
	return DefaultScope
}

// AdminGroup returns OIDCAdminGroup or DefaultAdminGroup when it is empty.
func (c Config) AdminGroup() string {
	if g := strings.TrimSpace(c.OIDCAdminGroup); g != "" {
		return g
	}
	return DefaultAdminGroup
}

// ErrNoCredentials is returned by NewBasic for an empty username or password.
var ErrNoCredentials = errors.New("auth: basic auth needs a non-empty username and password")

// ErrNoIssuer and ErrNoAudience are returned by NewVerifier when the
// configuration cannot verify tokens safely.
var (
	ErrNoIssuer   = errors.New("auth: APP_BROKER_OIDC_ISSUER is required for bearer auth")
	ErrNoAudience = errors.New("auth: APP_BROKER_OIDC_AUDIENCE is required for bearer auth")
)
