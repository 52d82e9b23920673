package scoped_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	ns, iss := grantedWithoutBinding(t, "late")
	// Given back late, as if the authorizer saw the grant late.
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
	ns, iss := grantedWithoutBinding(t, "never")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := iss.Kubeconfig(ctx, ns, "never", scoped.MinExpiration)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "honour the token of ServiceAccount "+ns+"/never")
	assert.Contains(t, err.Error(), "not yet allowed its namespace")
}

// grantedWithoutBinding grants account a namespace of its own, then takes the RoleBinding
// away: what an authorizer that has not yet seen the grant answers.
func grantedWithoutBinding(t *testing.T, account string) (string, *scoped.Issuer) {
	t.Helper()
	ctx := context.Background()
	ns := kubetest.Namespace(t)
	iss, err := scoped.New(kubetest.RESTConfig(t))
	require.NoError(t, err)
	require.NoError(t, iss.Grant(ctx, ns, account, nil))
	require.NoError(t, kubetest.Clientset(t).RbacV1().RoleBindings(ns).Delete(ctx, account+"-"+scoped.RoleName, metav1.DeleteOptions{}))
	return ns, iss
}
