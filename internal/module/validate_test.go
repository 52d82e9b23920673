package module

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The lifecycle-manager ModuleTemplate CRD's patterns (testdata/external-facts.json): what it
// rejects, these reject.
func TestValidateModuleTemplate(t *testing.T) {
	for _, name := range []string{"sample", "btp-operator", "keda", "api-gateway", strings.Repeat("a", 64)} {
		assert.NoError(t, ValidateTemplateModuleName(name), name)
	}
	for _, name := range []string{"keda2", "ab", "my-module", "Sample", "", "a-b", "sample-", strings.Repeat("a", 65)} {
		err := ValidateTemplateModuleName(name)
		assert.Error(t, err, name)
		assert.True(t, errors.Is(err, ErrInvalid))
	}
	for _, v := range []string{"1.0.0", "0.1.0", "1.0.0-rc1", "1.2.3-alpha-2", "10.20.30"} {
		assert.NoError(t, ValidateTemplateVersion(v), v)
	}
	for _, v := range []string{"v1.0.0", "1.0.0-rc.1", "1.0", "1.0.0+build", "01.0.0", "1.0.0-1rc", "", "1.0.0-" + strings.Repeat("a", 30)} {
		assert.Error(t, ValidateTemplateVersion(v), v)
	}
	for _, ch := range []string{"regular", "fast", "abc"} {
		assert.NoError(t, ValidateChannel(ch), ch)
	}
	for _, ch := range []string{"ab", "Fast", "fast1", "", strings.Repeat("a", 33)} {
		assert.Error(t, ValidateChannel(ch), ch)
	}
	assert.Error(t, ValidateModuleTemplate("keda2", "1.0.0", "regular"))
	assert.Error(t, ValidateModuleTemplate("keda", "v1.0.0", "regular"))
	assert.NoError(t, ValidateModuleTemplate("keda", "1.0.0", "regular"))
}

// OCM's component name pattern and limit, semver with build metadata, and OCM's tag mapping.
func TestValidateComponentAndVersion(t *testing.T) {
	for _, n := range []string{"kyma-project.io/module/sample", "github.com/acme/x_y.z", "a.bc/d"} {
		assert.NoError(t, ValidateComponentName(n), n)
	}
	for _, n := range []string{"sample", "Kyma-project.io/module/x", "kyma-project.io", "kyma-project.io/module/1x", "kyma.io/" + strings.Repeat("a", 249)} {
		assert.Error(t, ValidateComponentName(n), n)
	}
	for _, v := range []string{"1.0.0", "v1.0.0", "1.0.0-rc.1", "1.0.0+build.5", "1.0.0-rc.1+b"} {
		assert.NoError(t, ValidateVersion(v), v)
	}
	for _, v := range []string{"1.0", "1", "one", "1.0.0.0", "01.0.0"} {
		assert.Error(t, ValidateVersion(v), v)
	}
	assert.Equal(t, "1.0.0.build-5", VersionTag("1.0.0+5"))
	assert.Equal(t, "1.0.0-rc.1.build-b.2", VersionTag("1.0.0-rc.1+b.2"))
	assert.Equal(t, "1.0.0+5", TagVersion("1.0.0.build-5"))
	assert.Equal(t, "1.0.0", TagVersion("1.0.0"))
}

// The default CR against the CRD its manifest ships (the schema's facts: types, required,
// enum, pattern, bounds, unknown fields), and a CR of a kind the manifest has no CRD for.
func TestValidateDefaultCR(t *testing.T) {
	manifest := []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: x
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: samples.operator.kyma-project.io
spec:
  group: operator.kyma-project.io
  names: {kind: Sample, plural: samples}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [replicas]
            properties:
              replicas: {type: integer, minimum: 1, maximum: 5}
              mode: {type: string, enum: [fast, slow]}
              name: {type: string, pattern: '^[a-z]+$', maxLength: 8}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              tags: {type: array, items: {type: string}}
  - name: v1beta1
    served: false
    storage: false
`)
	cr := func(spec string) []byte {
		return []byte("apiVersion: operator.kyma-project.io/v1alpha1\nkind: Sample\nmetadata:\n  name: default\nspec:\n" + spec)
	}
	assert.NoError(t, ValidateDefaultCR(cr("  replicas: 2\n  mode: fast\n  name: abc\n  extra: {anything: 1}\n  tags: [a, b]\n"), manifest))
	for spec, want := range map[string]string{
		"  mode: fast\n":               ".spec.replicas: required",
		"  replicas: 9\n":              "above the maximum",
		"  replicas: 1.5\n":            "want an integer",
		"  replicas: 1\n  mode: x\n":   "is not one of",
		"  replicas: 1\n  name: A\n":   "does not match",
		"  replicas: 1\n  typo: 1\n":   ".spec.typo: unknown field",
		"  replicas: 1\n  tags: [1]\n": "want a string",
	} {
		err := ValidateDefaultCR(cr(spec), manifest)
		if assert.Error(t, err, spec) {
			assert.Contains(t, err.Error(), want, spec)
		}
	}
	err := ValidateDefaultCR([]byte("apiVersion: operator.kyma-project.io/v1beta1\nkind: Sample\nmetadata:\n  name: d\n"), manifest)
	assert.ErrorContains(t, err, "not served")
	assert.ErrorContains(t, ValidateDefaultCR([]byte("kind: Sample\n"), manifest), "apiVersion, kind and metadata.name")
	assert.ErrorContains(t, ValidateDefaultCR([]byte(": : :\n\t"), manifest), "not YAML")
	// No CRD for the kind in the manifest: only parsed.
	assert.NoError(t, ValidateDefaultCR([]byte("apiVersion: other.io/v1\nkind: Other\nmetadata:\n  name: d\nspec: {whatever: 1}\n"), manifest))
}
