package gqlschema

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGardenerConfigDecodesTheUnionMember(t *testing.T) {
	decode := func(t *testing.T, s string) GardenerConfig {
		t.Helper()
		var g GardenerConfig
		require.NoError(t, json.Unmarshal([]byte(s), &g))
		return g
	}
	g := decode(t, `{"name": "c", "provider": "azure", "providerSpecificConfig": {"__typename": "GCPProviderConfig", "zones": ["a"]}}`)
	assert.Equal(t, "c", *g.Name)
	assert.Equal(t, &GCPProviderConfig{Zones: []string{"a"}}, g.ProviderSpecificConfig, "__typename wins over the provider")

	g = decode(t, `{"provider": "AWS", "providerSpecificConfig": {"vpcCidr": "10.0.0.0/16", "awsZones": [{"name": "z"}]}}`)
	z := "z"
	assert.Equal(t, &AWSProviderConfig{VpcCidr: ptr("10.0.0.0/16"), AWSZones: []*AWSZone{{Name: &z}}}, g.ProviderSpecificConfig, "else the provider")

	g = decode(t, `{"providerSpecificConfig": {"__typename": "AzureProviderConfig", "zoneNames": ["1", "2"], "azureZones": [{"name": 1, "cidr": "10.0.0.0/19"}]}}`)
	assert.Equal(t, &AzureProviderConfig{Zones: []string{"1", "2"}, AzureZones: []*AzureZone{{Name: 1, Cidr: "10.0.0.0/19"}}}, g.ProviderSpecificConfig,
		"Azure's zones under their alias")

	g = decode(t, `{"provider": "gcp", "providerSpecificConfig": null}`)
	assert.Nil(t, g.ProviderSpecificConfig)

	var bad GardenerConfig
	require.ErrorContains(t, json.Unmarshal([]byte(`{"providerSpecificConfig": {"zones": ["a"]}}`), &bad), "neither its __typename")
}

func TestProviderConfigOf(t *testing.T) {
	m, err := ProviderConfigOf(&ProviderSpecificInput{OpenStackConfig: &OpenStackProviderConfigInput{Zones: []string{"a"}, FloatingPoolName: ptr("pool")}})
	require.NoError(t, err)
	assert.Equal(t, &OpenStackProviderConfig{Zones: []string{"a"}, FloatingPoolName: "pool"}, m)

	m, err = ProviderConfigOf(&ProviderSpecificInput{AWSConfig: &AWSProviderConfigInput{VpcCidr: "10.0.0.0/16", EnableIMDSv2: ptr(true)}})
	require.NoError(t, err)
	assert.Equal(t, &AWSProviderConfig{VpcCidr: ptr("10.0.0.0/16"), AWSZones: []*AWSZone{}, EnableIMDSv2: ptr(true)}, m, "non-null lists are empty, not null")

	m, err = ProviderConfigOf(nil)
	require.NoError(t, err)
	assert.Nil(t, m)
}

func ptr[T any](v T) *T { return &v }
