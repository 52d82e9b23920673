package module

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// lifecycleFacts is testdata/lifecycle-manager.yaml: what lifecycle-manager's CRDs accept.
type lifecycleFacts struct {
	Patterns struct {
		ModuleName      string `json:"moduleName"`
		TemplateVersion string `json:"templateVersion"`
	} `json:"patterns"`
	Rejects struct {
		Version    []string `json:"version"`
		ModuleName []string `json:"moduleName"`
	} `json:"rejects"`
	Accepts struct {
		Version    []string `json:"version"`
		ModuleName []string `json:"moduleName"`
	} `json:"accepts"`
}

func readLifecycleFacts(t *testing.T) lifecycleFacts {
	t.Helper()
	data, err := os.ReadFile("testdata/lifecycle-manager.yaml")
	require.NoError(t, err)
	var f lifecycleFacts
	require.NoError(t, yaml.Unmarshal(data, &f))
	return f
}

func templateWith(ns, name, moduleName, version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": OperatorAPIVersion, "kind": KindModuleTemplate,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"moduleName": moduleName, "version": version, "descriptor": map[string]any{}},
	}}
}

// The test CRDs reject what lifecycle-manager's reject, and the CLI refuses the same values
// before it writes a template.
func TestLifecycleManagerValidation(t *testing.T) {
	ctx := context.Background()
	facts := readLifecycleFacts(t)
	assert.Equal(t, facts.Patterns.ModuleName, templateModuleName.String())
	assert.Equal(t, facts.Patterns.TemplateVersion, templateVersion.String())
	dyn := kubetest.Dynamic(t)
	ns := kubetest.Namespace(t)
	client := dyn.Resource(ModuleTemplateGVR).Namespace(ns)
	i := 0
	create := func(moduleName, version string) error {
		i++
		_, err := client.Create(ctx, templateWith(ns, fmt.Sprintf("t%d", i), moduleName, version), metav1.CreateOptions{})
		return err
	}
	for _, v := range facts.Rejects.Version {
		assert.Error(t, create("sample", v), "the CRD rejects version %q", v)
		assert.ErrorContains(t, ValidateTemplateFields("sample", v), "version", v)
	}
	for _, v := range facts.Accepts.Version {
		assert.NoError(t, create("sample", v), "the CRD accepts version %q", v)
		if v != "" {
			assert.NoError(t, ValidateTemplateFields("sample", v))
		}
	}
	for _, m := range facts.Rejects.ModuleName {
		assert.Error(t, create(m, "1.0.0"), "the CRD rejects module name %q", m)
		assert.ErrorContains(t, ValidateTemplateFields(m, "1.0.0"), "module name", m)
	}
	for _, m := range facts.Accepts.ModuleName {
		assert.NoError(t, create(m, "1.0.0"), "the CRD accepts module name %q", m)
		if m != "" {
			assert.NoError(t, ValidateTemplateFields(m, "1.0.0"))
		}
	}

	// A release meta needs exactly one of channels and mandatory.
	mrm := func(spec map[string]any) error {
		i++
		_, err := dyn.Resource(ReleaseMetaGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": OperatorAPIVersion, "kind": KindModuleReleaseMeta,
			"metadata": map[string]any{"generateName": "mrm-", "namespace": ns}, "spec": spec,
		}}, metav1.CreateOptions{})
		return err
	}
	assert.ErrorContains(t, mrm(map[string]any{"moduleName": "sample"}), "exactly one of 'mandatory' or 'channels'")
	assert.Error(t, mrm(map[string]any{"moduleName": "sample", "mandatory": map[string]any{"version": "1.0.0"}, "channels": []any{map[string]any{"channel": "fast", "version": "1.0.0"}}}))
	assert.Error(t, mrm(map[string]any{"moduleName": "sample", "channels": []any{map[string]any{"channel": "ab", "version": "1.0.0"}}}))
	assert.NoError(t, mrm(map[string]any{"moduleName": "sample", "channels": []any{map[string]any{"channel": "fast", "version": "1.0.0"}}}))

	// The Kyma resource: channel required, policies enumerated.
	kyma := func(spec map[string]any) error {
		_, err := dyn.Resource(KymaGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": OperatorAPIVersion, "kind": KindKyma,
			"metadata": map[string]any{"generateName": "kyma-", "namespace": ns}, "spec": spec,
		}}, metav1.CreateOptions{})
		return err
	}
	assert.Error(t, kyma(map[string]any{}))
	assert.Error(t, kyma(map[string]any{"channel": "regular", "modules": []any{map[string]any{"name": "a", "customResourcePolicy": "Sometimes"}}}))
	assert.Error(t, kyma(map[string]any{"channel": "regular", "modules": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}}))
	assert.NoError(t, kyma(map[string]any{"channel": "regular", "modules": []any{map[string]any{"name": "a"}}}))
}

// Defect 6: templates are named <module>-<version>, with a release meta assigning the version
// to the channel; the channel-named form stays for older lifecycle-managers; versions and
// module names the CRD would reject are refused before anything is written.
func TestTemplateObjects(t *testing.T) {
	a := createSample(t, "sample", "1.2.3", "registry.example")
	objs, err := TemplateObjects(a, TemplateOptions{Namespace: "kcp-system"})
	require.NoError(t, err)
	require.Len(t, objs, 2)
	mrm, tmpl := objs[0], objs[1]
	assert.Equal(t, KindModuleReleaseMeta, mrm.GetKind())
	assert.Equal(t, "sample", mrm.GetName())
	assert.Equal(t, map[string]any{
		"moduleName": "sample", "ocmComponentName": "kyma-project.io/module/sample",
		"channels": []any{map[string]any{"channel": "fast", "version": "1.2.3"}},
		"beta":     false, "internal": false,
	}, mrm.Object["spec"])
	assert.Equal(t, "sample-1.2.3", tmpl.GetName())
	_, hasChannel, _ := unstructured.NestedString(tmpl.Object, "spec", "channel")
	assert.False(t, hasChannel)

	data, err := TemplateYAML(a, TemplateOptions{Namespace: "kcp-system"})
	require.NoError(t, err)
	back, err := ReadObjects(data)
	require.NoError(t, err)
	assert.Equal(t, objs, back)

	legacy, err := TemplateObjects(a, TemplateOptions{ChannelNamed: true, Channel: "regular"})
	require.NoError(t, err)
	require.Len(t, legacy, 1)
	assert.Equal(t, "sample-regular", legacy[0].GetName())
	ch, _, _ := unstructured.NestedString(legacy[0].Object, "spec", "channel")
	assert.Equal(t, "regular", ch)

	for _, bad := range []struct{ name, version, want string }{
		{"sample", "1.0.0-rc.1", "version"},
		{"keda2", "1.0.0", "module name"},
	} {
		b := createSample(t, bad.name, bad.version, "registry.example")
		_, err := TemplateObjects(b, TemplateOptions{})
		assert.ErrorContains(t, err, bad.want)
	}
}
