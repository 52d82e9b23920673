package instance

import "github.com/kyma-project/kyma-environment-broker/internal/storage"

// SMCredentials are the Service Manager credentials the platform passed in the instance's context
// (ERS `sm_operator_credentials`): the EMS steps use them instead of the broker's default ones.
// They live only in operations' encrypted secrets.
type SMCredentials struct {
	ClientID, ClientSecret string
	// URL is the Service Manager API (sm_url); TokenURL the UAA base (url).
	URL, TokenURL string
}

const (
	smClientID     = "sm/client_id"
	smClientSecret = "sm/client_secret"
	smURL          = "sm/url"
	smTokenURL     = "sm/token_url"
)

// Put stores the credentials in secrets (created when nil).
func (c SMCredentials) Put(secrets *storage.Secrets) {
	if *secrets == nil {
		*secrets = storage.Secrets{}
	}
	for k, v := range map[string]string{smClientID: c.ClientID, smClientSecret: c.ClientSecret, smURL: c.URL, smTokenURL: c.TokenURL} {
		(*secrets)[k] = v
	}
}

// SMCredentialsFrom reads credentials Put stored; ok is false when there are none.
func SMCredentialsFrom(secrets storage.Secrets) (SMCredentials, bool) {
	c := SMCredentials{ClientID: secrets[smClientID], ClientSecret: secrets[smClientSecret], URL: secrets[smURL], TokenURL: secrets[smTokenURL]}
	return c, c.ClientID != "" && c.URL != "" && c.TokenURL != ""
}
