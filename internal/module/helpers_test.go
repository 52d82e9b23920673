package module

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// The cluster tests need a kube-apiserver; the registry tests start their own registries.
func TestMain(m *testing.M) { kubetest.Main(m) }

// createSample writes a sample module into a new directory and creates it.
func createSample(t testing.TB, name, version, registry string) *Artifact {
	t.Helper()
	dir := t.TempDir()
	cfg, err := LoadConfig(moduletest.WriteSample(t, dir, name, version))
	require.NoError(t, err)
	a, err := Create(context.Background(), CreateOptions{Config: cfg, Dir: dir, Registry: registry})
	require.NoError(t, err)
	return a
}

func newKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

func testLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return l
}
