package service

import (
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

var (
	runtimeName = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)
	// Gardener shoot names are short DNS labels.
	clusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,19}[a-z0-9])?$`)
	k8sVersion  = regexp.MustCompile(`^\d+\.\d+(\.\d+)?$`)
)

// providers maps each supported provider to the providerSpecificConfig field it requires.
var providers = map[string]string{"gcp": "gcpConfig", "azure": "azureConfig", "aws": "awsConfig", "openstack": "openStackConfig"}

func validateProvision(in gqlschema.ProvisionRuntimeInput) error {
	if in.RuntimeInput == nil {
		return apperr.BadRequest("config.runtimeInput", "is required")
	}
	name := strings.TrimSpace(in.RuntimeInput.Name)
	if name == "" {
		return apperr.BadRequest("config.runtimeInput.name", "is required")
	}
	if len(name) > 64 || !runtimeName.MatchString(name) {
		return apperr.BadRequest("config.runtimeInput.name", "must be 1-64 letters, digits or dashes, starting and ending with a letter or digit, got %q", name)
	}
	if in.ClusterConfig == nil || in.ClusterConfig.GardenerConfig == nil {
		return apperr.BadRequest("config.clusterConfig.gardenerConfig", "is required")
	}
	if err := validateAdministrators("config.clusterConfig.administrators", in.ClusterConfig.Administrators); err != nil {
		return err
	}
	if err := validateGardener("config.clusterConfig.gardenerConfig", in.ClusterConfig.GardenerConfig); err != nil {
		return err
	}
	if in.KymaConfig != nil {
		return validateKyma("config.kymaConfig", in.KymaConfig)
	}
	return nil
}

func validateAdministrators(field string, admins []string) error {
	for i, a := range admins {
		if strings.TrimSpace(a) == "" {
			return apperr.BadRequest(fmt.Sprintf("%s[%d]", field, i), "must not be empty")
		}
	}
	return nil
}

func validateGardener(f string, g *gqlschema.GardenerConfigInput) error {
	if g.Name != nil && *g.Name != "" && !clusterName.MatchString(*g.Name) {
		return apperr.BadRequest(f+".name", "must be a lowercase DNS label of at most 21 characters, got %q", *g.Name)
	}
	if !k8sVersion.MatchString(g.KubernetesVersion) {
		return apperr.BadRequest(f+".kubernetesVersion", "must be a version like 1.31 or 1.31.2, got %q", g.KubernetesVersion)
	}
	provider := strings.ToLower(g.Provider)
	cfgField, ok := providers[provider]
	if !ok {
		return apperr.BadRequest(f+".provider", "must be one of gcp, azure, aws, openstack, got %q", g.Provider)
	}
	for field, v := range map[string]string{"targetSecret": g.TargetSecret, "region": g.Region, "machineType": g.MachineType} {
		if strings.TrimSpace(v) == "" {
			return apperr.BadRequest(f+"."+field, "is required")
		}
	}
	if _, _, err := net.ParseCIDR(g.WorkerCidr); err != nil {
		return apperr.BadRequest(f+".workerCidr", "must be a CIDR like 10.250.0.0/16, got %q", g.WorkerCidr)
	}
	for field, cidr := range map[string]*string{"podsCidr": g.PodsCidr, "servicesCidr": g.ServicesCidr} {
		if cidr == nil {
			continue
		}
		if _, _, err := net.ParseCIDR(*cidr); err != nil {
			return apperr.BadRequest(f+"."+field, "must be a CIDR like 100.64.0.0/12, got %q", *cidr)
		}
	}
	if t := g.ControlPlaneFailureTolerance; t != nil && *t != "" && *t != "node" && *t != "zone" {
		return apperr.BadRequest(f+".controlPlaneFailureTolerance", "must be empty, node or zone, got %q", *t)
	}
	if err := validateDNS(f+".dnsConfig", g.DNSConfig); err != nil {
		return err
	}
	if err := validateScaling(f, &g.AutoScalerMin, &g.AutoScalerMax, &g.MaxSurge, &g.MaxUnavailable, g.VolumeSizeGb); err != nil {
		return err
	}
	if g.ProviderSpecificConfig == nil {
		return apperr.BadRequest(f+".providerSpecificConfig", "is required")
	}
	if err := validateProviderConfig(f+".providerSpecificConfig", provider, cfgField, g.ProviderSpecificConfig); err != nil {
		return err
	}
	if g.OidcConfig != nil {
		return validateOIDC(f+".oidcConfig", g.OidcConfig)
	}
	return nil
}

func validateDNS(f string, d *gqlschema.DNSConfigInput) error {
	if d == nil {
		return nil
	}
	if strings.TrimSpace(d.Domain) == "" {
		return apperr.BadRequest(f+".domain", "is required")
	}
	for i, p := range d.Providers {
		pf := fmt.Sprintf("%s.providers[%d]", f, i)
		if p == nil {
			return apperr.BadRequest(pf, "must not be null")
		}
		for field, v := range map[string]string{"secretName": p.SecretName, "type": p.Type} {
			if strings.TrimSpace(v) == "" {
				return apperr.BadRequest(pf+"."+field, "is required")
			}
		}
	}
	return nil
}

func validateScaling(f string, min, max, surge, unavailable, volume *int) error {
	if min != nil && *min < 1 {
		return apperr.BadRequest(f+".autoScalerMin", "must be at least 1, got %d", *min)
	}
	if min != nil && max != nil && *min > *max {
		return apperr.BadRequest(f+".autoScalerMin", "must not be greater than autoScalerMax (%d > %d)", *min, *max)
	}
	if surge != nil && *surge < 0 {
		return apperr.BadRequest(f+".maxSurge", "must not be negative, got %d", *surge)
	}
	if unavailable != nil && *unavailable < 0 {
		return apperr.BadRequest(f+".maxUnavailable", "must not be negative, got %d", *unavailable)
	}
	if volume != nil && *volume < 1 {
		return apperr.BadRequest(f+".volumeSizeGB", "must be at least 1, got %d", *volume)
	}
	return nil
}

func validateProviderConfig(f, provider, cfgField string, p *gqlschema.ProviderSpecificInput) error {
	set := map[string]bool{"gcpConfig": p.GCPConfig != nil, "azureConfig": p.AzureConfig != nil, "awsConfig": p.AWSConfig != nil, "openStackConfig": p.OpenStackConfig != nil}
	if !set[cfgField] {
		return apperr.BadRequest(f+"."+cfgField, "is required for provider %s", provider)
	}
	for field, isSet := range set {
		if isSet && field != cfgField {
			return apperr.BadRequest(f+"."+field, "does not apply to provider %s", provider)
		}
	}
	switch {
	case p.GCPConfig != nil && len(p.GCPConfig.Zones) == 0:
		return apperr.BadRequest(f+".gcpConfig.zones", "must name at least one zone")
	case p.OpenStackConfig != nil && len(p.OpenStackConfig.Zones) == 0:
		return apperr.BadRequest(f+".openStackConfig.zones", "must name at least one zone")
	case p.AzureConfig != nil:
		if _, _, err := net.ParseCIDR(p.AzureConfig.VnetCidr); err != nil {
			return apperr.BadRequest(f+".azureConfig.vnetCidr", "must be a CIDR, got %q", p.AzureConfig.VnetCidr)
		}
		for i, z := range p.AzureConfig.AzureZones {
			zf := fmt.Sprintf("%s.azureConfig.azureZones[%d]", f, i)
			if z.Name < 1 {
				return apperr.BadRequest(zf+".name", "must be a zone number from 1, got %d", z.Name)
			}
			if _, _, err := net.ParseCIDR(z.Cidr); err != nil {
				return apperr.BadRequest(zf+".cidr", "must be a CIDR, got %q", z.Cidr)
			}
		}
	case p.AWSConfig != nil:
		if _, _, err := net.ParseCIDR(p.AWSConfig.VpcCidr); err != nil {
			return apperr.BadRequest(f+".awsConfig.vpcCidr", "must be a CIDR, got %q", p.AWSConfig.VpcCidr)
		}
		if len(p.AWSConfig.AWSZones) == 0 {
			return apperr.BadRequest(f+".awsConfig.awsZones", "must name at least one zone")
		}
		for i, z := range p.AWSConfig.AWSZones {
			if z == nil {
				return apperr.BadRequest(fmt.Sprintf("%s.awsConfig.awsZones[%d]", f, i), "must not be null")
			}
			for field, cidr := range map[string]string{"workerCidr": z.WorkerCidr, "publicCidr": z.PublicCidr, "internalCidr": z.InternalCidr} {
				if _, _, err := net.ParseCIDR(cidr); err != nil {
					return apperr.BadRequest(fmt.Sprintf("%s.awsConfig.awsZones[%d].%s", f, i, field), "must be a CIDR, got %q", cidr)
				}
			}
		}
	}
	return nil
}

func validateOIDC(f string, o *gqlschema.OIDCConfigInput) error {
	if strings.TrimSpace(o.ClientID) == "" {
		return apperr.BadRequest(f+".clientID", "is required")
	}
	if !strings.HasPrefix(o.IssuerURL, "https://") {
		return apperr.BadRequest(f+".issuerURL", "must be an https URL, got %q", o.IssuerURL)
	}
	return nil
}

func validateKyma(f string, k *gqlschema.KymaConfigInput) error {
	if strings.TrimSpace(k.Version) == "" {
		return apperr.BadRequest(f+".version", "is required")
	}
	// No components is valid: a Kyma without modules (the broker's modules: {default: false}).
	seen := map[string]bool{}
	for i, c := range k.Components {
		cf := fmt.Sprintf("%s.components[%d]", f, i)
		if c == nil || strings.TrimSpace(c.Component) == "" {
			return apperr.BadRequest(cf+".component", "is required")
		}
		if strings.TrimSpace(c.Namespace) == "" {
			return apperr.BadRequest(cf+".namespace", "is required")
		}
		if seen[c.Component] {
			return apperr.BadRequest(cf+".component", "%q is listed twice", c.Component)
		}
		seen[c.Component] = true
		if err := validateEntries(cf+".configuration", c.Configuration); err != nil {
			return err
		}
	}
	return validateEntries(f+".configuration", k.Configuration)
}

func validateEntries(f string, entries []*gqlschema.ConfigEntryInput) error {
	for i, e := range entries {
		if e == nil || strings.TrimSpace(e.Key) == "" {
			return apperr.BadRequest(fmt.Sprintf("%s[%d].key", f, i), "is required")
		}
	}
	return nil
}

func validateShootUpgrade(in gqlschema.UpgradeShootInput, current *gqlschema.GardenerConfigInput) error {
	f := "config.gardenerConfig"
	if in.GardenerConfig == nil {
		return apperr.BadRequest(f, "is required")
	}
	if err := validateAdministrators("config.administrators", in.Administrators); err != nil {
		return err
	}
	u := in.GardenerConfig
	if u.KubernetesVersion != nil && !k8sVersion.MatchString(*u.KubernetesVersion) {
		return apperr.BadRequest(f+".kubernetesVersion", "must be a version like 1.31 or 1.31.2, got %q", *u.KubernetesVersion)
	}
	// Limits are checked on the merged configuration, so a new max is compared to the old min.
	merged := mergeUpgrade(*current, u)
	if err := validateScaling(f, &merged.AutoScalerMin, &merged.AutoScalerMax, &merged.MaxSurge, &merged.MaxUnavailable, merged.VolumeSizeGb); err != nil {
		return err
	}
	if u.ProviderSpecificConfig != nil {
		provider := strings.ToLower(current.Provider)
		if err := validateProviderConfig(f+".providerSpecificConfig", provider, providers[provider], u.ProviderSpecificConfig); err != nil {
			return err
		}
	}
	if u.OidcConfig != nil {
		return validateOIDC(f+".oidcConfig", u.OidcConfig)
	}
	return nil
}
