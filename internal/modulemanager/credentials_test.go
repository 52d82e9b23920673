package modulemanager

import (
	"crypto/rsa"
	"encoding/base64"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A manager without a registry Secret pulls with the credentials of Config.DockerConfig for the
// registry's host (a registry with basic auth, as docker-registry's htpasswd): without them the
// pull is refused and the module is in Error naming the registry; with them it installs.
func TestManagerDockerConfigCredentials(t *testing.T) {
	srv := moduletest.Start(t, moduletest.Options{Auth: true})
	e := newEnvWith(t, srv)
	e.publish("private", "1.0.0", "regular", e.signWith(e.key))
	_, err := e.cl.Enable(e.ctx, e.ns, module.DefaultKymaName, module.ModuleSpec{Name: "private", CustomResourcePolicy: module.PolicyIgnore})
	require.NoError(t, err)
	key := e.ns + "/" + module.DefaultKymaName
	reconcile := func(cfg Config) map[string]any {
		t.Helper()
		cfg.Namespace, cfg.PlainHTTPRegistries, cfg.Log = e.ns, []string{e.addr}, testLog()
		cfg.PublicKeys = []*rsa.PublicKey{&e.key.PublicKey}
		m, err := New(kubetest.RESTConfig(t), cfg)
		require.NoError(t, err)
		_, err = m.Reconcile(e.ctx, key)
		require.NoError(t, err)
		return moduleStatusOf(e.kyma(), "private")
	}

	st := reconcile(Config{DockerConfig: []byte(`{"auths": {"other.example:5000": {"username": "keb", "password": "x"}}}`)})
	assert.Equal(t, StateError, st["state"])
	assert.Contains(t, st["message"], "private")
	assert.Contains(t, st["message"], e.addr)
	assert.False(t, e.exists(configMapGVR, e.ns, "private-operator"))

	auth := base64.StdEncoding.EncodeToString([]byte(srv.Username + ":" + srv.Password))
	st = reconcile(Config{DockerConfig: []byte(`{"auths": {"http://` + e.addr + `/": {"auth": "` + auth + `"}}}`)})
	assert.Equal(t, StateReady, st["state"], "%v", st)
	assert.True(t, e.exists(configMapGVR, e.ns, "private-operator"))
}

// DockerConfigCredentials reads docker's auth and username/password forms; its errors never
// quote the config.
func TestDockerConfigCredentials(t *testing.T) {
	u, p, err := DockerConfigCredentials([]byte(`{"auths": {"reg:5000": {"auth": "`+base64.StdEncoding.EncodeToString([]byte("u:p:w"))+`"}, "b": {"username": "x", "password": "y"}}}`), "reg:5000")
	require.NoError(t, err)
	assert.Equal(t, []string{"u", "p:w"}, []string{u, p})
	u, p, err = DockerConfigCredentials([]byte(`{"auths": {"b": {"username": "x", "password": "y"}}}`), "b")
	require.NoError(t, err)
	assert.Equal(t, []string{"x", "y"}, []string{u, p})
	u, p, err = DockerConfigCredentials([]byte(`{"auths": {}}`), "b")
	require.NoError(t, err)
	assert.Empty(t, u+p)
	_, _, err = DockerConfigCredentials([]byte(`{"auths": {"b": {"auth": "s3cret!"}}}`), "b")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	_, _, err = DockerConfigCredentials([]byte(`s3cret`), "b")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
}
