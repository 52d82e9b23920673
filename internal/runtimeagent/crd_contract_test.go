package runtimeagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// crdFixture is testdata/crds.json: the validation facts of the real CRDs, one line per
// constraint, and their subresources.
type crdFixture struct {
	Source map[string]string   `json:"source"`
	CRDs   map[string]crdFacts `json:"crds"`
}

type crdFacts struct {
	Subresources []string `json:"subresources"`
	Validation   []string `json:"validation"`
}

// validationFacts lists every constraint of a CRD version's schema as "path: constraint" lines,
// sorted: what the API server checks an object against, descriptions left out.
func validationFacts(schema map[string]any) []string {
	var out []string
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		add := func(format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := s[k]
			switch k {
			case "description":
			case "properties":
				props, _ := v.(map[string]any)
				for name, p := range props {
					pm, _ := p.(map[string]any)
					walk(path+"."+name, pm)
				}
			case "items":
				im, _ := v.(map[string]any)
				walk(path+"[]", im)
			case "additionalProperties":
				if am, ok := v.(map[string]any); ok {
					walk(path+"{}", am)
				} else {
					add("additionalProperties=%v", v)
				}
			case "required":
				var req []string
				for _, r := range v.([]any) {
					req = append(req, fmt.Sprint(r))
				}
				sort.Strings(req)
				add("required=%s", strings.Join(req, ","))
			default:
				b, _ := json.Marshal(v)
				add("%s=%s", k, b)
			}
		}
	}
	walk("", schema)
	sort.Strings(out)
	return out
}

// crdVersion is the one version of a CRD: its subresources and schema.
func crdVersion(t *testing.T, crd map[string]any) (subresources []string, schema map[string]any) {
	t.Helper()
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	require.Len(t, versions, 1)
	v, _ := versions[0].(map[string]any)
	subresources = []string{}
	if sub, ok := v["subresources"].(map[string]any); ok {
		for k := range sub {
			subresources = append(subresources, k)
		}
		sort.Strings(subresources)
	}
	sch, _ := v["schema"].(map[string]any)
	schema, _ = sch["openAPIV3Schema"].(map[string]any)
	return subresources, schema
}

func readCRDs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []map[string]any
	for {
		var crd map[string]any
		if err := dec.Decode(&crd); err != nil {
			break
		}
		if crd != nil {
			out = append(out, crd)
		}
	}
	return out
}

// The CRDs the project ships (and the kube-apiserver tests install) validate exactly as the real
// ones on runtimes and have the same subresources: none.
func TestShippedCRDsAreTheRealOnes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "crds.json"))
	require.NoError(t, err)
	var fx crdFixture
	require.NoError(t, json.Unmarshal(b, &fx))
	require.Len(t, fx.CRDs, 2)
	for name, want := range fx.CRDs {
		crds := readCRDs(t, filepath.Join("..", "..", "resources", "crds", name+".yaml"))
		require.Len(t, crds, 1, name)
		sub, schema := crdVersion(t, crds[0])
		assert.Equal(t, want.Subresources, sub, name)
		assert.Equal(t, want.Validation, validationFacts(schema), name)
	}
}

// TestWriteCRDFixture, run by hand with KEB_REAL_CRDS naming the real CRDs' YAML (one document
// per CRD), rewrites the facts of testdata/crds.json.
func TestWriteCRDFixture(t *testing.T) {
	src := os.Getenv("KEB_REAL_CRDS")
	if src == "" {
		t.Skip("KEB_REAL_CRDS is not set")
	}
	b, err := os.ReadFile(filepath.Join("testdata", "crds.json"))
	require.NoError(t, err)
	var fx crdFixture
	require.NoError(t, json.Unmarshal(b, &fx))
	fx.CRDs = map[string]crdFacts{}
	for _, crd := range readCRDs(t, src) {
		spec, _ := crd["spec"].(map[string]any)
		names, _ := spec["names"].(map[string]any)
		sub, schema := crdVersion(t, crd)
		fx.CRDs[fmt.Sprint(spec["group"])+"_"+fmt.Sprint(names["plural"])] = crdFacts{Subresources: sub, Validation: validationFacts(schema)}
	}
	out, err := json.MarshalIndent(fx, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "crds.json"), append(out, '\n'), 0o600))
}

// On the kube-apiserver with the shipped CRDs: the shapes the agent wrote before are refused as
// the real CRDs refuse them, and a CompassConnection has no status subresource.
func TestShippedCRDsRefuseWhatTheRealOnesRefuse(t *testing.T) {
	e := newEnv(t)
	apps := e.dyn.Resource(runtimeagent.ApplicationGVR)
	old := unstructuredApp(e.prefix + "-old")
	old.Object["spec"] = map[string]any{"compassMetadata": map[string]any{"applicationId": "a1"},
		"services": []any{map[string]any{"id": "b1", "name": "orders", "displayName": "orders"}}}
	_, err := apps.Create(e.ctx(), old, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	for _, field := range []string{"spec.compassMetadata.authentication", "spec.services[0].providerDisplayName",
		"spec.services[0].description", "spec.services[0].entries"} {
		assert.ErrorContains(t, err, field)
	}

	conns := e.dyn.Resource(runtimeagent.CompassConnectionGVR)
	conn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "compass.kyma-project.io/v1alpha1", "kind": "CompassConnection", "metadata": map[string]any{"name": e.ns},
		"spec": map[string]any{"managementInfo": map[string]any{"connectorUrl": "", "directorUrl": ""}},
	}}
	conn, err = conns.Create(e.ctx(), conn, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conns.Delete(context.Background(), e.ns, metav1.DeleteOptions{}) })
	conn.Object["status"] = map[string]any{"connectionState": "Connected"}
	_, err = conns.UpdateStatus(e.ctx(), conn, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no status subresource: %v", err)
	_, err = conns.Update(e.ctx(), conn, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.ErrorContains(t, err, "status.connectionStatus")
}
