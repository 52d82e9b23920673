package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
)

// Through OSB on the gardener backend: a global account's runtimes run on the account it claims
// from the project's pool (the Shoots name it), another global account gets another, and once
// the global account's last runtime is deprovisioned its binding is marked dirty.
func TestOSBRuntimesUseTheGlobalAccountsClaimedBinding(t *testing.T) {
	project, kc := startFakeGardener(t)
	b := bt.Start(t, bt.Options{
		NoSandbox: true,
		Backends:  fmt.Sprintf(`{"gardener": {"type": "gardener", "spec": {"project": %q, "kubeconfig": %q}}}`, project, string(kc)),
		Clusters:  &runtimeclient.Clusters{},
	})
	dyn := kubetest.Dynamic(t)
	ns := "garden-" + project
	binding := func(name string) map[string]string {
		u, err := dyn.Resource(hyperscaler.SecretBindingGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return u.GetLabels()
	}
	provision := func(ga, sa string) string {
		id := uuid.NewString()
		r := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-"+sa), bt.SAPContext(ga, sa)))
		require.Equal(t, http.StatusAccepted, r.Status, r.String())
		b.WaitSucceeded(id, r.Operation())
		return id
	}
	deprovision := func(id string) {
		r := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
		require.Equal(t, http.StatusAccepted, r.Status, r.String())
		b.WaitSucceeded(id, r.Operation())
	}
	shootBindings := func() []string {
		l, err := dyn.Resource(hyperscaler.ShootGVR).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		var out []string
		for _, s := range l.Items {
			name, _, _ := unstructured.NestedString(s.Object, "spec", "secretBindingName")
			out = append(out, name)
		}
		return out
	}

	first := provision("ga-pool", "sa-1")
	second := provision("ga-pool", "sa-2")
	other := provision("ga-pool-2", "sa-3")

	var mine, theirs string
	for _, n := range []string{"aws-1", "aws-2"} {
		switch binding(n)[hyperscaler.LabelTenantName] {
		case "ga-pool":
			mine = n
		case "ga-pool-2":
			theirs = n
		}
	}
	require.NotEmpty(t, mine, "the global account claimed an aws binding")
	require.NotEmpty(t, theirs, "the other global account claimed the other")
	assert.ElementsMatch(t, []string{mine, mine, theirs}, shootBindings(), "each Shoot names its global account's binding")
	assert.NotContains(t, binding("aws-shared"), hyperscaler.LabelTenantName)

	deprovision(first)
	assert.NotContains(t, binding(mine), hyperscaler.LabelDirty, "the global account still has a runtime on it")
	deprovision(second)
	assert.Equal(t, "true", binding(mine)[hyperscaler.LabelDirty], "its last runtime is gone")
	assert.NotContains(t, binding(theirs), hyperscaler.LabelDirty)
	deprovision(other)
	assert.Equal(t, "true", binding(theirs)[hyperscaler.LabelDirty])
}
