package e2e

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/static"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

// TestScopedRuntimeCredentials provisions two runtimes of a static pool whose host is the test
// API server, then checks through the provisioner's API and the broker's OSB binding that
// every credential handed out is confined to its runtime's namespace: the runtime's own
// kubeconfig, and a binding's account with a token of expiration_seconds that unbind revokes.
func TestScopedRuntimeCredentials(t *testing.T) {
	ctx := context.Background()
	kc := kubetest.Kubeconfig(t)
	set := fmt.Sprintf(`{"pool": {"type": "static", "spec": {"runtimes": [
		// seed 004's fields, and the host cluster's kubeconfig
		{"host": "http://pool-a.localhost:9091", "slots": 5, "data_dir": "/mnt/data", "audience_url": "http://pool-a.localhost:8081", "kubeconfig": %q}
	]}}}`, string(kc))
	p := provisionertest.New(t, provisionertest.Options{Backends: infrastructure.Config{SetJSON: set}, Clusters: runtimeclient.Clusters{}})
	svc := p.Provisioner.Service

	provision := func(name string) string {
		in := input(name)
		in.KymaConfig = nil
		st, err := svc.ProvisionRuntime(ctx, tenant, in)
		require.NoError(t, err)
		wait(t, svc, *st.ID, gqlschema.OperationStateSucceeded)
		return *st.RuntimeID
	}
	a, b := provision("scoped-a"), provision("scoped-b")

	status, err := svc.RuntimeStatus(ctx, tenant, a)
	require.NoError(t, err)
	cfg := status.RuntimeConfiguration
	require.NotNil(t, cfg.Allocation, "runtimeStatus shows the allocation")
	assert.Equal(t, "http://pool-a.localhost:9091", cfg.Allocation.Host)
	assert.Equal(t, "http://pool-a.localhost:8081", *cfg.Allocation.AudienceURL)
	assert.Equal(t, "/mnt/data", *cfg.Allocation.DataDir)
	assert.Equal(t, 1, *cfg.Allocation.Slots)
	assert.Equal(t, static.Namespace(a), *cfg.Allocation.Namespace)
	require.NotNil(t, cfg.Kubeconfig)
	assert.NotEqual(t, string(kc), *cfg.Kubeconfig, "not the host's credentials")

	// The runtime's own kubeconfig: its namespace, not the other runtime's, not the cluster.
	own := clientOf(t, *cfg.Kubeconfig)
	_, err = own.CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = own.CoreV1().ConfigMaps(static.Namespace(b)).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "another runtime's namespace: %v", err)
	_, err = own.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the host's system namespace: %v", err)

	// The broker's OSB binding of an instance whose runtime is a.
	store := p.Store
	instanceID, bindingID := "inst-"+a[:8], "binding-"+a[:8]
	inst := storage.Instance{InstanceID: instanceID, RuntimeID: a, GlobalAccountID: tenant, ServiceID: "svc", PlanID: "plan"}
	_, _, err = store.Instances().InsertInstanceWithOperation(ctx, inst, storage.Operation{
		ID: "op-" + a[:8], InstanceID: instanceID, Type: instance.TypeProvision, State: storage.StateSucceeded, CreatedAt: time.Now(), UpdatedAt: time.Now(),
	})
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	osb := broker.New(store, nil, client.NewInProcess(svc), broker.Config{}, log)
	details := domain.BindDetails{ServiceID: "svc", PlanID: "plan", RawParameters: json.RawMessage(`{"expiration_seconds": 900}`)}
	for params, want := range map[string]string{
		`{"expiration_seconds": 599}`:  "between 600 and 7200",
		`{"expiration_seconds": 7201}`: "between 600 and 7200",
		`{"expiration_seconds": "1"}`:  "must be an integer",
		`{"ttl": 1}`:                   "parameters.ttl",
	} {
		_, err := osb.Bind(ctx, instanceID, bindingID, domain.BindDetails{ServiceID: "svc", PlanID: "plan", RawParameters: json.RawMessage(params)}, false)
		assert.ErrorContains(t, err, want, params)
	}
	issuedAt := time.Now()
	bound, err := osb.Bind(ctx, instanceID, bindingID, details, false)
	require.NoError(t, err)
	creds := bound.Credentials.(map[string]string)
	again, err := osb.Bind(ctx, instanceID, bindingID, details, false)
	require.NoError(t, err)
	assert.Equal(t, creds, again.Credentials, "a repeat gets the same credentials")
	expiresAt, err := time.Parse(time.RFC3339, creds["expires_at"])
	require.NoError(t, err)
	assert.WithinDuration(t, issuedAt.Add(900*time.Second), expiresAt, 5*time.Second, "expiration_seconds")
	stored, err := store.Bindings().GetBinding(ctx, instanceID, bindingID)
	require.NoError(t, err)
	assert.Equal(t, creds["kubeconfig"], stored.Credentials["kubeconfig"])
	assert.NotEqual(t, *cfg.Kubeconfig, creds["kubeconfig"], "a binding has an account of its own")

	bc := clientOf(t, creds["kubeconfig"])
	_, err = bc.CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the binding works in its runtime's namespace")
	_, err = bc.CoreV1().ConfigMaps(static.Namespace(b)).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the binding cannot read another runtime's namespace: %v", err)

	// The binding's token carries its expiry; the API server refuses a token of the binding's
	// account once that expiry has passed. (TokenRequest issues nothing shorter than 10
	// minutes, so the expired token is the binding's own claims re-signed with the test
	// server's service-account key and an expiry in the past; the same claims with a future
	// expiry are accepted, so the expiry alone makes the difference.)
	claims := tokenClaims(t, creds["kubeconfig"])
	assert.InDelta(t, float64(expiresAt.Unix()), claims["exp"].(float64), 1, "the token expires when the binding says")
	assert.InDelta(t, 900, claims["exp"].(float64)-claims["iat"].(float64), 1, "expiration_seconds")
	live := resign(t, claims, time.Now().Add(time.Hour))
	_, err = clientWithToken(t, creds["kubeconfig"], live).CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the re-signed claims are the binding's (control)")
	expired := resign(t, claims, time.Now().Add(-time.Minute))
	_, err = clientWithToken(t, creds["kubeconfig"], expired).CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsUnauthorized(err), "an expired binding token is refused: %v", err)

	// Unbind revokes: at once denied (the account's RoleBinding is gone), soon unauthenticated.
	_, err = osb.Unbind(ctx, instanceID, bindingID, domain.UnbindDetails{ServiceID: "svc", PlanID: "plan"}, false)
	require.NoError(t, err)
	_, err = bc.CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err), "unbind revokes: %v", err)
	require.Eventually(t, func() bool {
		_, err := bc.CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 250*time.Millisecond, "the revoked token is refused")
	_, err = store.Bindings().GetBinding(ctx, instanceID, bindingID)
	assert.ErrorIs(t, err, storage.ErrNotFound)
	_, err = own.CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the runtime's own account outlives the binding")

	// Deprovisioning removes the runtime's account.
	opID, err := svc.DeprovisionRuntime(ctx, tenant, a)
	require.NoError(t, err)
	wait(t, svc, opID, gqlschema.OperationStateSucceeded)
	_, err = own.CoreV1().ConfigMaps(static.Namespace(a)).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err), "a deprovisioned runtime's credentials are refused: %v", err)
}

func clientOf(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

func clientWithToken(t *testing.T, kubeconfig, token string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	require.NoError(t, err)
	cfg = rest.AnonymousClientConfig(cfg)
	cfg.BearerToken = token
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// tokenClaims decodes the claims of the kubeconfig's bearer token.
func tokenClaims(t *testing.T, kubeconfig string) map[string]any {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	require.NoError(t, err)
	parts := strings.Split(cfg.BearerToken, ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(raw, &claims))
	return claims
}

// resign signs claims with the test API server's service-account key (scripts/kube.sh keeps it
// in pki/ next to the kubeconfig), with exp (and nbf/iat before it) changed.
func resign(t *testing.T, claims map[string]any, exp time.Time) string {
	t.Helper()
	path := os.Getenv(kubetest.EnvKubeconfig)
	require.NotEmpty(t, path)
	pemBytes, err := os.ReadFile(filepath.Join(filepath.Dir(path), "pki", "sa.key"))
	require.NoError(t, err)
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	rsaKey := key.(*rsa.PrivateKey)
	pub, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	require.NoError(t, err)
	kid := sha256.Sum256(pub)

	c := map[string]any{}
	for k, v := range claims {
		c[k] = v
	}
	c["exp"], c["iat"], c["nbf"] = exp.Unix(), exp.Add(-time.Hour).Unix(), exp.Add(-time.Hour).Unix()
	header, err := json.Marshal(map[string]string{"alg": "RS256", "kid": base64.RawURLEncoding.EncodeToString(kid[:])})
	require.NoError(t, err)
	payload, err := json.Marshal(c)
	require.NoError(t, err)
	signing := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, rsaKey, crypto.SHA256, digest[:])
	require.NoError(t, err)
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
