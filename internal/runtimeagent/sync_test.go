package runtimeagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDesiredApplication(t *testing.T) {
	a := &Agent{cfg: Config{CredentialsNamespace: "kyma-integration"}}
	desc := "orders"
	app := DirectorApplication{ID: "app-id", Name: "orders", Description: &desc, Labels: map[string]any{"team": "a", "n": 1.0}}
	app.Bundles.Data = []DirectorBundle{{ID: "p1", Name: "api"}, {ID: "p2", Name: "events"}}
	app.Bundles.Data[1].DefaultInstanceAuth = &struct {
		Credential json.RawMessage `json:"credential"`
	}{Credential: json.RawMessage(`{"clientId":"c","clientSecret":"s","url":"https://auth.example/token"}`)}
	app.Auths = append(app.Auths, struct {
		ID string `json:"id"`
	}{ID: "auth-1"})

	d, err := a.desiredApplication("rt-1", app)
	require.NoError(t, err)
	assert.Equal(t, "orders", d.app.Name)
	assert.Equal(t, "app-id", d.app.Spec.CompassMetadata.ApplicationID)
	assert.Equal(t, map[string]string{"team": "a", "n": "1"}, d.app.Spec.Labels)
	assert.Equal(t, "rt-1", d.app.Labels[labelRuntimeID])
	require.Len(t, d.app.Spec.Services, 2)
	assert.Empty(t, d.app.Spec.Services[0].Entries)
	require.Len(t, d.secrets, 1)
	s := d.secrets[0]
	assert.Equal(t, "kyma-integration", s.Namespace)
	assert.Equal(t, map[string][]byte{"clientId": []byte("c"), "clientSecret": []byte("s"), "url": []byte("https://auth.example/token")}, s.Data)
	assert.Equal(t, []string{"auth-1"}, d.app.Spec.CompassMetadata.Authentication.ClientIDs)
	assert.NotNil(t, d.app.Spec.Services[0].Entries, "the CRD requires entries, empty or not")
	assert.Equal(t, &Credentials{Type: "OAuth", SecretName: s.Name}, d.app.Spec.Services[1].Entries[0].Credentials)

	data, kind, err := credentialData(json.RawMessage(`{"username":"u","password":"p"}`))
	require.NoError(t, err)
	assert.Equal(t, "Basic", kind)
	assert.Equal(t, map[string][]byte{"username": []byte("u"), "password": []byte("p")}, data)

	_, err = a.desiredApplication("rt-1", DirectorApplication{ID: "x", Name: "Not A Name"})
	assert.ErrorContains(t, err, "not a valid resource name")
}
