package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/module/modulespec"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Through OSB: provisioning with modules.list gives the runtime's Kyma resource (gardener
// backend, real kube-apiserver) exactly those modules; /runtimes shows them; an update with
// other modules replaces them.
func TestOSBModulesReachTheRuntimesKymaResource(t *testing.T) {
	project, kc := startFakeGardener(t)
	b := bt.Start(t, bt.Options{
		NoSandbox: true, // no reconciler: the provisioner installs Kyma
		Backends:  fmt.Sprintf(`{"gardener": {"type": "gardener", "spec": {"project": %q, "kubeconfig": %q}}}`, project, string(kc)),
		Clusters:  &runtimeclient.Clusters{},
	})
	e := &env{t: t, dyn: kubetest.Dynamic(t), core: kubetest.Clientset(t), project: project}

	id := uuid.NewString()
	params := bt.AWSParams("rt-modules")
	params["modules"] = map[string]any{"list": []map[string]any{
		{"name": "btp-operator", "channel": "fast", "customResourcePolicy": "Ignore"},
		{"name": "keda"},
	}}
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, params, bt.SAPContext("ga-mod", "sa-mod")))
	require.Equal(t, http.StatusAccepted, prov.Status, prov.String())
	b.WaitSucceeded(id, prov.Operation())
	assert.Equal(t, []modulespec.ModuleSpec{{Name: "btp-operator", Channel: "fast", CustomResourcePolicy: modulespec.PolicyIgnore}, {Name: "keda", CustomResourcePolicy: modulespec.PolicyCreateAndDel}}, e.kymaModules(t)) // the CRD defaults the policy, as lifecycle-manager's does

	rt := b.Get("/runtimes?instance_id=" + id)
	require.Equal(t, http.StatusOK, rt.Status, rt.String())
	assert.Contains(t, rt.String(), `"modules":{"list":[{"name":"btp-operator","channel":"fast","customResourcePolicy":"Ignore"},{"name":"keda"}]}`)

	up := b.Patch(bt.InstancePath(id), map[string]any{"service_id": bt.ServiceID, "plan_id": bt.AWSPlanID,
		"parameters": map[string]any{"modules": map[string]any{"list": []map[string]any{{"name": "serverless"}}}}})
	require.Equal(t, http.StatusAccepted, up.Status, up.String())
	b.WaitSucceeded(id, up.Operation())
	assert.Equal(t, []modulespec.ModuleSpec{{Name: "serverless", CustomResourcePolicy: modulespec.PolicyCreateAndDel}}, e.kymaModules(t))
	rt = b.Get("/runtimes?instance_id=" + id)
	assert.Contains(t, rt.String(), `"modules":{"list":[{"name":"serverless"}]}`)

	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status, del.String())
	b.WaitSucceeded(id, del.Operation())
}
