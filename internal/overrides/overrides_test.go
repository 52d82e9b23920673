package overrides

import (
	"encoding/json"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSecretValuesStayOutOfTheData(t *testing.T) {
	var o Overrides
	var secrets storage.Secrets
	o.Set(&secrets, "monitoring", Entry{Key: "grafana.clientID", Value: "id"}, Entry{Key: "grafana.clientSecret", Value: "s3cr3t", Secret: true})

	raw, err := json.Marshal(o)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "s3cr3t")
	assert.Equal(t, "s3cr3t", secrets[SecretKey("monitoring", "grafana.clientSecret")])

	resolved, err := o.Resolve(secrets)
	require.NoError(t, err)
	assert.Equal(t, []Entry{{Key: "grafana.clientID", Value: "id"}, {Key: "grafana.clientSecret", Value: "s3cr3t", Secret: true}}, resolved["monitoring"])
	assert.Empty(t, o["monitoring"][1].Value, "resolving must not write secrets back into the data")
}

func TestSetReplacesEntriesWithTheSameKey(t *testing.T) {
	var o Overrides
	var secrets storage.Secrets
	o.Set(&secrets, Global, Entry{Key: "a", Value: "1"}, Entry{Key: "b", Value: "2"})
	o.Set(&secrets, Global, Entry{Key: "a", Value: "3", Secret: true})
	require.Len(t, o[Global], 2)
	assert.Equal(t, Entry{Key: "a", Secret: true}, o[Global][0])
	assert.Equal(t, []string{Global}, o.Components())
}

func TestResolveNamesAMissingSecret(t *testing.T) {
	o := Overrides{"eventing": {{Key: "kafka.password", Secret: true}}}
	_, err := o.Resolve(storage.Secrets{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kafka.password")
	assert.Contains(t, err.Error(), "eventing")
}

func TestCopyCarriesSecretsAcross(t *testing.T) {
	var src Overrides
	var srcSecrets storage.Secrets
	src.Set(&srcSecrets, "eventing", Entry{Key: "k", Value: "v", Secret: true}, Entry{Key: "plain", Value: "p"})

	var dst Overrides
	var dstSecrets storage.Secrets
	require.NoError(t, dst.Copy(&dstSecrets, src, srcSecrets))
	resolved, err := dst.Resolve(dstSecrets)
	require.NoError(t, err)
	assert.Equal(t, []Entry{{Key: "k", Value: "v", Secret: true}, {Key: "plain", Value: "p"}}, resolved["eventing"])
}

func TestHasAndInstall(t *testing.T) {
	o := Overrides{Global: {{Key: "g"}}, "eventing": {{Key: "k"}}, "monitoring": {{Key: "m"}}}
	assert.True(t, o.Has("eventing", "k"))
	assert.False(t, o.Has("eventing", "m"))
	assert.Equal(t, []string{"istio", "eventing", "monitoring"}, o.Install([]string{"istio", "eventing"}),
		"the given components first, then the others with overrides, never the global pseudo-component")
}
