package hyperscaler

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

// The Gardener pool's tests run on a real kube-apiserver with the SecretBinding,
// CredentialsBinding and Shoot CRDs of resources/crds.
func TestMain(m *testing.M) { kubetest.Main(m) }
