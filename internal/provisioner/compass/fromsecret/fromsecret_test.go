package fromsecret_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass/fromsecret"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// directorStandIn issues a token per OAuth client and records which clients called the API.
type directorStandIn struct {
	mu      sync.Mutex
	callers []string
}

func (d *directorStandIn) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth/token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok || secret != "secret-of-"+id {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "token-of-" + id, "token_type": "bearer", "expires_in": 3600})
	})
	mux.HandleFunc("/graphql", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		d.callers = append(d.callers, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer token-of-"))
		d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data": {"result": {"id": "c-1", "name": "rt", "status": {"condition": "CONNECTED"}}}}`)
	})
	return mux
}

func (d *directorStandIn) last() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.callers) == 0 {
		return ""
	}
	return d.callers[len(d.callers)-1]
}

// TestCredentialsFromSecret: the Director's OAuth client is read from the Secret that
// APP_CREDENTIALS_NAMESPACE and APP_OAUTH_CREDENTIALS_SECRET_NAME name, and a changed Secret is
// used without a restart.
func TestCredentialsFromSecret(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubetest.Clientset(t)
	ns := kubetest.Namespace(t)
	d := &directorStandIn{}
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	secret := func(id string) map[string][]byte {
		return map[string][]byte{fromsecret.KeyClientID: []byte(id), fromsecret.KeyClientSecret: []byte("secret-of-" + id), fromsecret.KeyTokenURL: []byte(srv.URL + "/oauth/token")}
	}
	base := director.Config{URL: srv.URL + "/graphql", RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: 10 * time.Millisecond}
	log := logrus.New()
	log.SetOutput(io.Discard)

	_, err := fromsecret.Start(ctx, kube, ns, "compass-provisioner-credentials", base, log)
	assert.ErrorContains(t, err, "APP_CREDENTIALS_NAMESPACE, APP_OAUTH_CREDENTIALS_SECRET_NAME", "a missing Secret fails the start, naming the variables")

	s, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "compass-provisioner-credentials"},
		Data: map[string][]byte{fromsecret.KeyClientID: []byte("only-an-id")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = fromsecret.Start(ctx, kube, ns, "compass-provisioner-credentials", base, log)
	assert.ErrorContains(t, err, "key client_secret is missing")

	s.Data = secret("provisioner-1")
	_, err = kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	c, err := fromsecret.Start(ctx, kube, ns, "compass-provisioner-credentials", base, log)
	require.NoError(t, err)
	require.NoError(t, c.SetRuntimeStatusCondition(ctx, "tenant", "c-1", "CONNECTED"))
	assert.Equal(t, "provisioner-1", d.last())

	// Rotated credentials are picked up without a restart.
	s, err = kube.CoreV1().Secrets(ns).Get(ctx, "compass-provisioner-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	s.Data = secret("provisioner-2")
	_, err = kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return c.SetRuntimeStatusCondition(ctx, "tenant", "c-1", "CONNECTED") == nil && d.last() == "provisioner-2"
	}, 20*time.Second, 50*time.Millisecond, "the changed Secret is used")

	// A deleted Secret fails Director calls, naming it, instead of using stale credentials.
	require.NoError(t, kube.CoreV1().Secrets(ns).Delete(ctx, "compass-provisioner-credentials", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		err := c.SetRuntimeStatusCondition(ctx, "tenant", "c-1", "CONNECTED")
		return err != nil && strings.Contains(err.Error(), "was deleted")
	}, 20*time.Second, 50*time.Millisecond)
}
