package upgrade

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/process/provisioning"
	"github.com/kyma-project/kyma-environment-broker/internal/process/steptest"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kubeconfigStep = "Get_Kubeconfig"

func runKubeconfig(e *env, op KymaOp, now time.Time) (KymaOp, time.Duration, error) {
	return steptest.Run(context.Background(), GetKubeconfig{e.deps}, op, now)
}

func TestGetKubeconfig_Name(t *testing.T) {
	assert.Equal(t, kubeconfigStep, GetKubeconfig{}.Name())
}

func TestGetKubeconfig_KeepsItInTheSecrets(t *testing.T) {
	e := newEnv(t)
	e.prov.runtimeStatus = withKubeconfig(testKubeconfig)
	op := e.initialized(t, "2.21.0")

	out, wait, err := runKubeconfig(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Empty(t, out.LastError)
	assert.Equal(t, testKubeconfig, out.Secrets[provisioning.KubeconfigSecret])
	assert.Equal(t, grafanaSecret, out.Secrets[grafanaKey], "the other secrets stay")
	assert.NotContains(t, dataJSON(t, out.Data), "apiVersion", "the kubeconfig is never in the data")
	calls := e.prov.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "RuntimeConfiguration", calls[0].Method)
	assert.Equal(t, testGA, calls[0].Tenant)
	assert.Equal(t, testRuntimeID, calls[0].ID)
}

func TestGetKubeconfig_WithoutSecrets(t *testing.T) {
	e := newEnv(t)
	e.prov.runtimeStatus = withKubeconfig(testKubeconfig)
	op := kymaOp("2.21.0")
	op.Data.GlobalAccountID, op.Data.RuntimeID = testGA, testRuntimeID

	out, _, err := runKubeconfig(e, op, t0)
	require.NoError(t, err)
	assert.Equal(t, testKubeconfig, out.Secrets[provisioning.KubeconfigSecret])
}

func TestGetKubeconfig_ReadsOnce(t *testing.T) {
	e := newEnv(t)
	e.prov.runtimeStatus = withKubeconfig("another")
	op := e.initialized(t, "2.21.0")
	op.Secrets[provisioning.KubeconfigSecret] = testKubeconfig

	out, wait, err := runKubeconfig(e, op, t0)
	require.NoError(t, err)
	assert.Zero(t, wait)
	assert.Equal(t, testKubeconfig, out.Secrets[provisioning.KubeconfigSecret])
	assert.Empty(t, e.prov.Calls())
}

func TestGetKubeconfig_Retries(t *testing.T) {
	for name, tc := range map[string]struct {
		answer func(string, string) (*gqlschema.RuntimeStatus, error)
		want   string
	}{
		"provisioner error": {
			answer: func(string, string) (*gqlschema.RuntimeStatus, error) { return nil, errors.New("connection refused") },
			want:   "provisioner: reading the runtime's configuration: connection refused",
		},
		"no kubeconfig yet": {
			answer: func(string, string) (*gqlschema.RuntimeStatus, error) { return &gqlschema.RuntimeStatus{}, nil },
			want:   "provisioner: the runtime has no kubeconfig yet",
		},
		"empty kubeconfig": {
			answer: withKubeconfig(""),
			want:   "provisioner: the runtime has no kubeconfig yet",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.prov.runtimeStatus = tc.answer
			op := e.initialized(t, "2.21.0")

			out, wait, err := runKubeconfig(e, op, t0)
			require.NoError(t, err)
			assert.Equal(t, testPoll, wait)
			assert.Equal(t, tc.want, out.LastError)
			assert.NotContains(t, out.Secrets, provisioning.KubeconfigSecret)
		})
	}
}

func TestGetKubeconfig_GivesUpAfterRetryTime(t *testing.T) {
	e := newEnv(t)
	e.prov.runtimeStatus = func(string, string) (*gqlschema.RuntimeStatus, error) { return nil, errors.New("connection refused") }
	op := tryingSince(e.initialized(t, "2.21.0"), kubeconfigStep, t0)

	_, wait, err := runKubeconfig(e, op, t0.Add(testRetryTime-time.Second))
	require.NoError(t, err)
	assert.Equal(t, testPoll, wait)

	_, wait, err = runKubeconfig(e, op, t0.Add(testRetryTime+time.Second))
	require.Error(t, err)
	assert.Zero(t, wait)
	assert.Contains(t, err.Error(), "provisioner: reading the runtime's configuration: connection refused")
	assert.Contains(t, err.Error(), "step Get_Kubeconfig gave up after 1m0s")
}
