package shootcontract_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener/shootcontract"
)

// valid is a Shoot that keeps every rule (OpenStack, the provider with most of them).
const valid = `{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot", "metadata": {"name": "c-1"},
 "spec": {"cloudProfile": {"kind": "CloudProfile", "name": "converged-cloud"}, "region": "eu-de-1",
  "credentialsBindingName": "openstack-binding", "kubernetes": {"version": "1.34.1"},
  "provider": {"type": "openstack",
   "infrastructureConfig": {"apiVersion": "openstack.provider.extensions.gardener.cloud/v1alpha1", "kind": "InfrastructureConfig", "floatingPoolName": "fip", "networks": {"workers": "10.250.0.0/16"}},
   "controlPlaneConfig": {"apiVersion": "openstack.provider.extensions.gardener.cloud/v1alpha1", "kind": "ControlPlaneConfig", "loadBalancerProvider": "f5"}},
  "extensions": [{"type": "shoot-auditlog-service", "providerConfig": {"apiVersion": "service.auditlog.extensions.gardener.cloud/v1alpha1", "kind": "AuditlogConfig", "type": "standard", "tenantID": "t", "serviceURL": "https://auditlog.example.com", "secretReferenceName": "auditlog-credentials"}}],
  "resources": [{"name": "auditlog-credentials", "resourceRef": {"apiVersion": "v1", "kind": "Secret", "name": "auditlog-secret"}}]}}`

func decode(t *testing.T) map[string]any {
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(valid), &m))
	return m
}

func spec(m map[string]any) map[string]any { return m["spec"].(map[string]any) }

func TestFixtureCitesItsSources(t *testing.T) {
	f, err := shootcontract.Load()
	require.NoError(t, err)
	for name, s := range f.Sources {
		assert.NotEmpty(t, s.Repository, name)
		assert.NotEmpty(t, s.Path, name)
		assert.Len(t, s.Commit, 40, name)
	}
	a := f.AdminKubeconfigRequest
	assert.Equal(t, "POST", a.Method)
	assert.Equal(t, "/apis/core.gardener.cloud/v1beta1/namespaces/{namespace}/shoots/{name}/adminkubeconfig", a.Path)
	assert.Equal(t, int64(600), a.Spec.ExpirationSeconds.Min)
}

func TestValidShootKeepsEveryRule(t *testing.T) {
	assert.Empty(t, shootcontract.MustLoad().Check(decode(t)))
}

// TestEachRuleRejects: every mutation breaks exactly the rule it names.
func TestEachRuleRejects(t *testing.T) {
	facts := shootcontract.MustLoad()
	for rule, mutate := range map[string]func(m map[string]any){
		"cloud-profile-required": func(m map[string]any) { delete(spec(m), "cloudProfile") },
		"cloud-profile-kind": func(m map[string]any) {
			spec(m)["cloudProfile"].(map[string]any)["kind"] = "Other"
		},
		"cloud-profile-name-forbidden-from-1.34": func(m map[string]any) { spec(m)["cloudProfileName"] = "converged-cloud" },
		"region-required":                        func(m map[string]any) { delete(spec(m), "region") },
		"binding-required":                       func(m map[string]any) { delete(spec(m), "credentialsBindingName") },
		"binding-exclusive": func(m map[string]any) {
			spec(m)["secretBindingName"] = "s"
			spec(m)["kubernetes"].(map[string]any)["version"] = "1.33.0"
		},
		"secret-binding-forbidden-from-1.34": func(m map[string]any) {
			delete(spec(m), "credentialsBindingName")
			spec(m)["secretBindingName"] = "s"
		},
		"resources": func(m map[string]any) {
			spec(m)["resources"] = append(spec(m)["resources"].([]any), map[string]any{"name": "other", "resourceRef": map[string]any{"kind": "Secret"}})
		},
		"extension-types": func(m map[string]any) {
			spec(m)["extensions"] = append(spec(m)["extensions"].([]any), map[string]any{"type": ""})
		},
		"openstack-floating-pool": func(m map[string]any) {
			delete(spec(m)["provider"].(map[string]any)["infrastructureConfig"].(map[string]any), "floatingPoolName")
		},
		"openstack-workers": func(m map[string]any) {
			spec(m)["provider"].(map[string]any)["infrastructureConfig"].(map[string]any)["networks"] = map[string]any{}
		},
		"openstack-load-balancer-provider": func(m map[string]any) {
			spec(m)["provider"].(map[string]any)["controlPlaneConfig"].(map[string]any)["loadBalancerProvider"] = ""
		},
		"provider-config-kinds": func(m map[string]any) {
			spec(m)["provider"].(map[string]any)["controlPlaneConfig"].(map[string]any)["kind"] = "InfrastructureConfig"
		},
		"auditlog-extension": func(m map[string]any) { delete(spec(m), "resources") },
		"control-plane-failure-tolerance": func(m map[string]any) {
			spec(m)["controlPlane"] = map[string]any{"highAvailability": map[string]any{"failureTolerance": map[string]any{"type": "region"}}}
		},
		"networking-cidrs": func(m map[string]any) {
			spec(m)["networking"] = map[string]any{"pods": "100.96.0.0/11", "services": "100.104.0.0"}
		},
		"dns-providers": func(m map[string]any) {
			spec(m)["dns"] = map[string]any{"domain": "a.example.com", "providers": []any{
				map[string]any{"primary": true, "type": "aws-route53", "secretName": "s1"},
				map[string]any{"primary": false, "secretName": "s2"},
			}}
		},
	} {
		t.Run(rule, func(t *testing.T) {
			m := decode(t)
			mutate(m)
			got := facts.Check(m)
			require.NotEmpty(t, got)
			for _, v := range got {
				assert.Equal(t, rule, v.Rule, v.String())
			}
		})
	}
	t.Run("dns-providers primary", func(t *testing.T) {
		m := decode(t)
		spec(m)["dns"] = map[string]any{"domain": "a.example.com", "providers": []any{
			map[string]any{"primary": true, "type": "aws-route53", "secretName": "s1"},
			map[string]any{"primary": true, "type": "aws-route53", "secretName": "s2"},
		}}
		got := facts.Check(m)
		require.Len(t, got, 1)
		assert.Equal(t, "spec.dns.providers[1].primary", got[0].Field)
		assert.Equal(t, "Forbidden", got[0].Type)
	})
	t.Run("valid control-plane inputs keep every rule", func(t *testing.T) {
		m := decode(t)
		spec(m)["controlPlane"] = map[string]any{"highAvailability": map[string]any{"failureTolerance": map[string]any{"type": "zone"}}}
		spec(m)["networking"] = map[string]any{"nodes": "10.250.0.0/16", "pods": "100.96.0.0/11", "services": "100.104.0.0/13"}
		spec(m)["dns"] = map[string]any{"domain": "a.example.com", "providers": []any{
			map[string]any{"primary": true, "type": "aws-route53", "secretName": "s1", "domains": map[string]any{"include": []any{"a.example.com"}}},
		}}
		assert.Empty(t, facts.Check(m))
	})
	t.Run("azure-zone-cidrs", func(t *testing.T) {
		m := decode(t)
		p := spec(m)["provider"].(map[string]any)
		p["type"] = "azure"
		p["infrastructureConfig"] = map[string]any{"apiVersion": "azure.provider.extensions.gardener.cloud/v1alpha1", "kind": "InfrastructureConfig",
			"networks": map[string]any{"vnet": map[string]any{"cidr": "10.250.0.0/16"}, "zones": []any{
				map[string]any{"name": int64(1), "cidr": "10.250.0.0/19"}, map[string]any{"name": int64(2)}}}}
		p["controlPlaneConfig"] = map[string]any{"apiVersion": "azure.provider.extensions.gardener.cloud/v1alpha1", "kind": "ControlPlaneConfig"}
		got := facts.Check(m)
		require.Len(t, got, 1, "%v", got)
		assert.Equal(t, "azure-zone-cidrs", got[0].Rule)
		assert.Equal(t, "spec.provider.infrastructureConfig.networks.zones[1].cidr", got[0].Field)
	})
	t.Run("auditlog-extension fields", func(t *testing.T) {
		m := decode(t)
		pc := spec(m)["extensions"].([]any)[0].(map[string]any)["providerConfig"].(map[string]any)
		delete(pc, "serviceURL")
		delete(pc, "secretReferenceName")
		got := facts.Check(m)
		var fields []string
		for _, v := range got {
			fields = append(fields, v.Field)
		}
		assert.ElementsMatch(t, []string{"spec.extensions[0].providerConfig.serviceURL", "spec.extensions[0].providerConfig.secretReferenceName"}, fields)
	})
}

func TestAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"1.34.0": true, "v1.34.0-rc.1": true, "1.35.1": true, "2.0.0": true, "1.33.9": false, "1.3": false, "x": false, "": false} {
		assert.Equal(t, want, shootcontract.AtLeast(v, "1.34"), v)
	}
}
