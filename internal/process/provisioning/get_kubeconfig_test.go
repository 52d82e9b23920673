package provisioning_test

import (
	"errors"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/stretchr/testify/assert"
)

const testKubeconfig = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: kubeconfig-t0ken\n"

func kubeconfigStep(e *env) step { return provisioning.GetKubeconfig{Deps: e.deps} }

func TestGetKubeconfig_Name(t *testing.T) {
	assert.Equal(t, "Get_Kubeconfig", provisioning.GetKubeconfig{}.Name())
}

func TestGetKubeconfig_KeepsItInTheSecrets(t *testing.T) {
	e := newEnv(t)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", testKubeconfig)

	out := e.mustRun(t, kubeconfigStep(e), ready(), t0)
	assert.Equal(t, testKubeconfig, out.Secrets[provisioning.KubeconfigSecret])
	assert.Empty(t, out.LastError)
	assertNotInData(t, out, "kubeconfig-t0ken")
	assert.Equal(t, []provCall{{Method: "RuntimeConfiguration", Tenant: testGA, ID: "rt-1"}}, e.prov.Calls())

	// A rerun does not ask again.
	again := e.mustRun(t, kubeconfigStep(e), out, t0.Add(testPoll))
	assert.Equal(t, out.Secrets, again.Secrets)
	assert.Len(t, e.prov.Calls(), 1)
}

func TestGetKubeconfig_RetriesThenFails(t *testing.T) {
	for name, answer := range map[string]func(string, string) (*gqlschema.RuntimeStatus, error){
		"no kubeconfig yet": runtimeStatusOf("c-1a2b3c", ""),
		"provisioner error": func(string, string) (*gqlschema.RuntimeStatus, error) { return nil, errors.New("connection refused") },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.runtimeStatus = answer

			out, wait, err := e.run(kubeconfigStep(e), startedAt(ready(), "Get_Kubeconfig", t0), t0)
			assertRetrying(t, out, wait, err, "provisioner")
			assert.Empty(t, out.Secrets)

			_, wait, err = e.run(kubeconfigStep(e), out, afterRetryWindow())
			assertFailed(t, wait, err, "provisioner", "Get_Kubeconfig")
			assert.Contains(t, err.Error(), "gave up after "+testRetryTime.String())
		})
	}
}

func TestGetKubeconfig_RecoversWithinTheRetryWindow(t *testing.T) {
	e := newEnv(t)
	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", "")
	out, wait, err := e.run(kubeconfigStep(e), startedAt(ready(), "Get_Kubeconfig", t0), t0)
	assertRetrying(t, out, wait, err, "provisioner")

	e.prov.runtimeStatus = runtimeStatusOf("c-1a2b3c", testKubeconfig)
	out = e.mustRun(t, kubeconfigStep(e), out, t0.Add(testPoll))
	assert.Equal(t, testKubeconfig, out.Secrets[provisioning.KubeconfigSecret])
	assert.Empty(t, out.LastError)
}
