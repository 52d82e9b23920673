package provisioning

import (
	"fmt"
	"net"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// providerConfig is the provider-specific cluster configuration: zones in the region and,
// for AWS, per-zone subnets carved out of the nodes CIDR.
func providerConfig(provider, region, nodes string) (*gqlschema.ProviderSpecificInput, error) {
	switch provider {
	case "gcp":
		return &gqlschema.ProviderSpecificInput{GCPConfig: &gqlschema.GCPProviderConfigInput{Zones: []string{region + "-a"}}}, nil
	case "azure":
		return &gqlschema.ProviderSpecificInput{AzureConfig: &gqlschema.AzureProviderConfigInput{VnetCidr: nodes, Zones: []string{"1"}}}, nil
	case "openstack":
		return &gqlschema.ProviderSpecificInput{OpenStackConfig: &gqlschema.OpenStackProviderConfigInput{Zones: []string{region + "a"}}}, nil
	case "aws":
		_, n, err := net.ParseCIDR(nodes)
		if err != nil {
			return nil, fmt.Errorf("nodes CIDR %q: %w", nodes, err)
		}
		ones, _ := n.Mask.Size()
		if ones > 16 {
			return nil, fmt.Errorf("nodes CIDR %q is too small for AWS subnets (need /16 or larger)", nodes)
		}
		base := n.IP.To4()
		subnet := func(third byte, bits int) string {
			return fmt.Sprintf("%d.%d.%d.0/%d", base[0], base[1], third, bits)
		}
		return &gqlschema.ProviderSpecificInput{AWSConfig: &gqlschema.AWSProviderConfigInput{
			VpcCidr:  nodes,
			AWSZones: []*gqlschema.AWSZoneInput{{Name: region + "a", WorkerCidr: subnet(0, 19), PublicCidr: subnet(32, 20), InternalCidr: subnet(48, 20)}},
		}}, nil
	}
	return nil, fmt.Errorf("unknown provider %q", provider)
}
