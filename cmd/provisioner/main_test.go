package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
)

// TestDirectorClientChoice: APP_DIRECTOR_OAUTH_* override; else the credentials Secret of the
// control-plane cluster when one is configured (KUBECONFIG or in-cluster); else the stand-in.
// (The Secret itself is tested against a real API server in director/fromsecret.)
func TestDirectorClientChoice(t *testing.T) {
	ctx := context.Background()
	log := logrus.New()
	log.SetOutput(io.Discard)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	require.NoError(t, os.Unsetenv("KUBERNETES_SERVICE_HOST"))
	t.Setenv("KUBECONFIG", "")
	cfg := config.Config{CredentialsNamespace: "compass-system", OAuthCredentialsSecret: "compass-provisioner-credentials"}
	base := director.Config{URL: "https://director.example/graphql"}

	d, err := directorClient(ctx, cfg, base, log)
	require.NoError(t, err)
	assert.Nil(t, d, "no control-plane cluster, no override: the local stand-in")

	explicit := base
	explicit.OAuthClientID, explicit.OAuthClientSecret, explicit.OAuthTokenURL = "id", "secret", "https://director.example/oauth/token"
	d, err = directorClient(ctx, cfg, explicit, log)
	require.NoError(t, err)
	assert.IsType(t, &director.Client{}, d, "APP_DIRECTOR_OAUTH_CLIENT_ID overrides")

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"cp": {Server: "https://127.0.0.1:1"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"cp": {Token: "t"}},
		Contexts:       map[string]*clientcmdapi.Context{"cp": {Cluster: "cp", AuthInfo: "cp"}},
		CurrentContext: "cp",
	}, kc))
	t.Setenv("KUBECONFIG", kc)
	_, err = directorClient(ctx, cfg, base, log)
	assert.ErrorContains(t, err, "Secret compass-system/compass-provisioner-credentials (APP_CREDENTIALS_NAMESPACE, APP_OAUTH_CREDENTIALS_SECRET_NAME)",
		"with a control-plane cluster the Secret is read")
}
