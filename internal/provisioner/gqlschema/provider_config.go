package gqlschema

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ProviderConfigOf returns the member of the ProviderSpecificConfig union that in configures,
// nil when in sets none. Input and output members share their JSON names, so the member is
// in's set config re-decoded.
func ProviderConfigOf(in *ProviderSpecificInput) (ProviderSpecificConfig, error) {
	if in == nil {
		return nil, nil
	}
	var (
		member ProviderSpecificConfig
		src    any
	)
	switch {
	case in.GCPConfig != nil:
		member, src = &GCPProviderConfig{}, in.GCPConfig
	case in.AzureConfig != nil:
		member, src = &AzureProviderConfig{}, in.AzureConfig
	case in.AWSConfig != nil:
		member, src = &AWSProviderConfig{}, in.AWSConfig
	case in.OpenStackConfig != nil:
		member, src = &OpenStackProviderConfig{}, in.OpenStackConfig
	default:
		return nil, nil
	}
	raw, err := json.Marshal(src)
	if err != nil {
		return nil, fmt.Errorf("encoding the provider configuration: %w", err)
	}
	if err := json.Unmarshal(raw, member); err != nil {
		return nil, fmt.Errorf("decoding the provider configuration: %w", err)
	}
	return normalizeMember(member), nil
}

// normalizeMember fills the lists the schema declares non-null with empty ones.
func normalizeMember(m ProviderSpecificConfig) ProviderSpecificConfig {
	switch c := m.(type) {
	case *GCPProviderConfig:
		if c.Zones == nil {
			c.Zones = []string{}
		}
	case *AWSProviderConfig:
		if c.AWSZones == nil {
			c.AWSZones = []*AWSZone{}
		}
	case *OpenStackProviderConfig:
		if c.Zones == nil {
			c.Zones = []string{}
		}
	}
	return m
}

// AzureZoneNamesAlias is the response name under which a document selects AzureProviderConfig's
// zones next to GCPProviderConfig's or OpenStackProviderConfig's: those are [String!]!, Azure's
// [String!], and GraphQL refuses one response name with two shapes.
const AzureZoneNamesAlias = "zoneNames"

// UnmarshalJSON decodes a GardenerConfig as the API answers it: the providerSpecificConfig
// union's member is told by its __typename (which clients should select), else by the
// config's provider. Azure's zones are read from AzureZoneNamesAlias too.
func (g *GardenerConfig) UnmarshalJSON(b []byte) error {
	type plain GardenerConfig
	var wire struct {
		plain
		ProviderSpecificConfig json.RawMessage `json:"providerSpecificConfig"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		return err
	}
	*g = GardenerConfig(wire.plain)
	g.ProviderSpecificConfig = nil
	raw := wire.ProviderSpecificConfig
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var typed struct {
		Typename string `json:"__typename"`
	}
	if err := json.Unmarshal(raw, &typed); err != nil {
		return fmt.Errorf("decoding providerSpecificConfig: %w", err)
	}
	provider := ""
	if g.Provider != nil {
		provider = *g.Provider
	}
	member := providerMember(typed.Typename, provider)
	if member == nil {
		return fmt.Errorf("decoding providerSpecificConfig: neither its __typename (%q) nor the provider (%q) tells its type", typed.Typename, provider)
	}
	if err := json.Unmarshal(raw, member); err != nil {
		return fmt.Errorf("decoding providerSpecificConfig as %T: %w", member, err)
	}
	if azure, ok := member.(*AzureProviderConfig); ok && azure.Zones == nil {
		var names struct {
			Zones []string `json:"zoneNames"`
		}
		if err := json.Unmarshal(raw, &names); err != nil {
			return fmt.Errorf("decoding providerSpecificConfig's %s: %w", AzureZoneNamesAlias, err)
		}
		azure.Zones = names.Zones
	}
	g.ProviderSpecificConfig = member
	return nil
}

func providerMember(typename, provider string) ProviderSpecificConfig {
	switch typename {
	case "GCPProviderConfig":
		return &GCPProviderConfig{}
	case "AzureProviderConfig":
		return &AzureProviderConfig{}
	case "AWSProviderConfig":
		return &AWSProviderConfig{}
	case "OpenStackProviderConfig":
		return &OpenStackProviderConfig{}
	}
	switch strings.ToLower(provider) {
	case "gcp":
		return &GCPProviderConfig{}
	case "azure":
		return &AzureProviderConfig{}
	case "aws":
		return &AWSProviderConfig{}
	case "openstack":
		return &OpenStackProviderConfig{}
	}
	return nil
}
