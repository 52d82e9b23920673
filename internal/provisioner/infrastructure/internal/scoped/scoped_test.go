package scoped_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/scoped"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// TestKubeconfigWaitsUntilTheGrantIsHonoured: credentials are handed out only once the API
// server allows them their namespace, so a grant that takes effect late delays issuing
// instead of producing a kubeconfig that is refused on first use.
func TestKubeconfigWaitsUntilTheGrantIsHonoured(t *testing.T) {
	ctx := context.Background()
	ns := kubetest.Namespace(t)
	admin := kubetest.Clientset(t)
	iss, err := scoped.New(kubetest.RESTConfig(t))
	require.NoError(t, err)
	require.NoError(t, iss.Grant(ctx, ns, "late", nil))
	// The grant is taken away, as if the authorizer had not yet seen it, and given back late.
	rb := "late-" + scoped.RoleName
	require.NoError(t, admin.RbacV1().RoleBindings(ns).Delete(ctx, rb, metav1.DeleteOptions{}))
	const late = 1500 * time.Millisecond
	start := time.Now()
	go func() {
		time.Sleep(late)
		assert.NoError(t, iss.Grant(ctx, ns, "late", nil))
	}()

	creds, err := iss.Kubeconfig(ctx, ns, "late", scoped.MinExpiration)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), late, "issuing waited for the RoleBinding")
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(creds.Kubeconfig))
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the first request with the credentials succeeds")
}

// TestKubeconfigGivesUpOnAGrantNeverHonoured: the wait is bounded; the error says what was
// waited for and the API server's last answer, for the caller to retry.
func TestKubeconfigGivesUpOnAGrantNeverHonoured(t *testing.T) {
	ctx := context.Background()
	ns := kubetest.Namespace(t)
	admin := kubetest.Clientset(t)
	iss, err := scoped.New(kubetest.RESTConfig(t))
	require.NoError(t, err)
	require.NoError(t, iss.Grant(ctx, ns, "never", nil))
	err = admin.RbacV1().RoleBindings(ns).Delete(ctx, "never-"+scoped.RoleName, metav1.DeleteOptions{})
	require.False(t, err != nil && !apierrors.IsNotFound(err), "%v", err)

	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = iss.Kubeconfig(ctx, ns, "never", scoped.MinExpiration)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "honour the token of ServiceAccount "+ns+"/never")
	assert.Contains(t, err.Error(), "not yet allowed its namespace")
}
