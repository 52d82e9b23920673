package instance

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
)

func TestSMCredentialsRoundTripThroughSecrets(t *testing.T) {
	var secrets storage.Secrets
	_, ok := SMCredentialsFrom(secrets)
	assert.False(t, ok)

	c := SMCredentials{ClientID: "id", ClientSecret: "s", URL: "https://sm", TokenURL: "https://uaa"}
	c.Put(&secrets)
	got, ok := SMCredentialsFrom(secrets)
	assert.True(t, ok)
	assert.Equal(t, c, got)

	delete(secrets, smTokenURL)
	_, ok = SMCredentialsFrom(secrets)
	assert.False(t, ok, "incomplete credentials are not used")
}
