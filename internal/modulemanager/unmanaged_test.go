package modulemanager

import (
	"crypto/rsa"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
)

// setManaged sets managed on the module's entry of the Kyma resource's spec.modules.
func (e *env) setManaged(name string, managed bool) {
	e.t.Helper()
	require.NoError(e.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		k := e.kyma()
		mods, _, _ := unstructured.NestedSlice(k.Object, "spec", "modules")
		for i, it := range mods {
			if m, ok := it.(map[string]any); ok && m["name"] == name {
				m["managed"] = managed
				mods[i] = m
			}
		}
		require.NoError(e.t, unstructured.SetNestedSlice(k.Object, mods, "spec", "modules"))
		_, err := e.dyn.Resource(module.KymaGVR).Namespace(e.ns).Update(e.ctx, k, metav1.UpdateOptions{})
		return err
	}))
}

// A module whose entry is switched to managed: false is left alone, as lifecycle-manager does:
// its manifest's objects and default CR stay (also when the Kyma resource is deleted), and its
// status is Unmanaged without making the Kyma resource anything but Ready. Managed again, it is
// reconciled again.
func TestManagerLeavesUnmanagedModules(t *testing.T) {
	e := newEnv(t)
	const name = "keeper"
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() {
		_ = e.dyn.Resource(crdGVR).Delete(e.ctx, "samples."+moduletest.OperatorGVR(name).Group, metav1.DeleteOptions{})
	})
	e.publish(name, "1.0.0", "regular", e.signWith(e.key))
	moduletest.RunSampleOperator(t, e.dyn, name, e.ns)
	e.startManager(Config{PublicKeys: []*rsa.PublicKey{&e.key.PublicKey}})
	_, err := e.cl.Enable(e.ctx, e.ns, module.DefaultKymaName, module.ModuleSpec{Name: name})
	require.NoError(t, err)
	e.waitModule(name, state(StateReady))

	objects := func() []bool {
		return []bool{
			e.exists(configMapGVR, e.ns, name+"-operator"), e.exists(configMapGVR, e.ns, name+"-v1.0.0"),
			e.exists(moduletest.OperatorGVR(name), e.ns, name), e.exists(crdGVR, "", "samples."+moduletest.OperatorGVR(name).Group),
		}
	}
	all := []bool{true, true, true, true}
	require.Equal(t, all, objects())

	e.setManaged(name, false)
	st := e.waitModule(name, state(StateUnmanaged))
	assert.Equal(t, "1.0.0", st["version"], "the status keeps what was installed")
	// A removal would have started in the pass that wrote Unmanaged; give the manager a few more.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		require.Equal(t, all, objects(), "an unmanaged module's objects stay")
		time.Sleep(200 * time.Millisecond)
	}
	s, _, _ := unstructured.NestedString(e.kyma().Object, "status", "state")
	assert.Equal(t, StateReady, s)

	// Managed again: reconciled (Ready), still one of each object.
	e.setManaged(name, true)
	e.waitModule(name, state(StateReady))
	require.Equal(t, all, objects())

	// Unmanaged, then the Kyma resource deleted: the finalizer goes, the module stays.
	e.setManaged(name, false)
	e.waitModule(name, state(StateUnmanaged))
	require.NoError(t, e.dyn.Resource(module.KymaGVR).Namespace(e.ns).Delete(e.ctx, module.DefaultKymaName, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(module.KymaGVR).Namespace(e.ns).Get(e.ctx, module.DefaultKymaName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "the Kyma resource is deleted")
	assert.Equal(t, all, objects(), "an unmanaged module outlives its Kyma resource")
}
