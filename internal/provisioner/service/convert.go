package service

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// secretMask replaces secret configuration values in everything the API returns.
const secretMask = "***"

func clusterConfig(g gqlschema.GardenerConfigInput, name string) (infrastructure.ClusterConfig, error) {
	provider, err := json.Marshal(g.ProviderSpecificConfig)
	if err != nil {
		return infrastructure.ClusterConfig{}, fmt.Errorf("encoding provider configuration: %w", err)
	}
	c := infrastructure.ClusterConfig{
		Name: name, KubernetesVersion: g.KubernetesVersion, Provider: strings.ToLower(g.Provider), Region: g.Region,
		TargetSecret: g.TargetSecret, MachineType: g.MachineType, WorkerCidr: g.WorkerCidr,
		AutoScalerMin: g.AutoScalerMin, AutoScalerMax: g.AutoScalerMax, MaxSurge: g.MaxSurge, MaxUnavailable: g.MaxUnavailable,
		ProviderConfig: provider,
	}
	c.MachineImage, c.MachineImageVer, c.DiskType = deref(g.MachineImage), deref(g.MachineImageVersion), deref(g.DiskType)
	c.Purpose, c.LicenceType, c.Seed = deref(g.Purpose), deref(g.LicenceType), deref(g.Seed)
	c.PodsCidr, c.ServicesCidr, c.ExposureClassName = deref(g.PodsCidr), deref(g.ServicesCidr), deref(g.ExposureClassName)
	c.ControlPlaneFailureTolerance = deref(g.ControlPlaneFailureTolerance)
	// The real provisioner disables the Shoot Networking Filter unless told otherwise.
	c.ShootNetworkingFilterDisabled = g.ShootNetworkingFilterDisabled == nil || *g.ShootNetworkingFilterDisabled
	c.EuAccess = g.EuAccess != nil && *g.EuAccess
	c.ShootAndSeedSameRegion = g.ShootAndSeedSameRegion != nil && *g.ShootAndSeedSameRegion
	if g.VolumeSizeGb != nil {
		c.VolumeSizeGB = *g.VolumeSizeGb
	}
	if d := g.DNSConfig; d != nil {
		c.DNS = &infrastructure.DNSConfig{Domain: d.Domain}
		for _, p := range d.Providers {
			if p != nil {
				c.DNS.Providers = append(c.DNS.Providers, infrastructure.DNSProvider{
					DomainsInclude: append([]string{}, p.DomainsInclude...), Primary: p.Primary, SecretName: p.SecretName, Type: p.Type,
				})
			}
		}
	}
	return c, nil
}

// The real provisioner's defaults of an OpenStack configuration (its schema since 2024 makes
// both optional: kyma-project/control-plane components/provisioner/pkg/gqlschema/schema.graphql
// at 08eff574).
const (
	defaultOpenStackFloatingPool = "FloatingIP-external-kyma-01"
	defaultOpenStackCloudProfile = "converged-cloud-kyma"
)

// withProviderDefaults returns p with the real provisioner's defaults of what it leaves unset,
// a copy when there are any: p belongs to the caller.
func withProviderDefaults(p *gqlschema.ProviderSpecificInput) *gqlschema.ProviderSpecificInput {
	if p == nil || p.OpenStackConfig == nil || (p.OpenStackConfig.FloatingPoolName != nil && p.OpenStackConfig.CloudProfileName != nil) {
		return p
	}
	out, os := *p, *p.OpenStackConfig
	if os.FloatingPoolName == nil {
		pool := defaultOpenStackFloatingPool
		os.FloatingPoolName = &pool
	}
	if os.CloudProfileName == nil {
		profile := defaultOpenStackCloudProfile
		os.CloudProfileName = &profile
	}
	out.OpenStackConfig = &os
	return &out
}

// mergeUpgrade applies the fields an upgradeShoot sets to the current configuration.
func mergeUpgrade(cur gqlschema.GardenerConfigInput, u *gqlschema.GardenerUpgradeInput) gqlschema.GardenerConfigInput {
	setS := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setI := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setS(&cur.KubernetesVersion, u.KubernetesVersion)
	setS(&cur.MachineType, u.MachineType)
	setI(&cur.AutoScalerMin, u.AutoScalerMin)
	setI(&cur.AutoScalerMax, u.AutoScalerMax)
	setI(&cur.MaxSurge, u.MaxSurge)
	setI(&cur.MaxUnavailable, u.MaxUnavailable)
	for dst, v := range map[**string]*string{&cur.DiskType: u.DiskType, &cur.Purpose: u.Purpose, &cur.MachineImage: u.MachineImage,
		&cur.MachineImageVersion: u.MachineImageVersion, &cur.ExposureClassName: u.ExposureClassName} {
		if v != nil {
			*dst = v
		}
	}
	if u.VolumeSizeGb != nil {
		cur.VolumeSizeGb = u.VolumeSizeGb
	}
	if u.EnableKubernetesVersionAutoUpdate != nil {
		cur.EnableKubernetesVersionAutoUpdate = u.EnableKubernetesVersionAutoUpdate
	}
	if u.EnableMachineImageVersionAutoUpdate != nil {
		cur.EnableMachineImageVersionAutoUpdate = u.EnableMachineImageVersionAutoUpdate
	}
	if u.ProviderSpecificConfig != nil {
		cur.ProviderSpecificConfig = u.ProviderSpecificConfig
	}
	if u.OidcConfig != nil {
		cur.OidcConfig = u.OidcConfig
	}
	if u.ShootNetworkingFilterDisabled != nil {
		cur.ShootNetworkingFilterDisabled = u.ShootNetworkingFilterDisabled
	}
	return cur
}

// kymaFromInput splits a Kyma configuration into what is stored in clear and the secret
// values, which go to the runtime's encrypted secrets.
func kymaFromInput(in *gqlschema.KymaConfigInput) (*operations.Kyma, storage.Secrets) {
	if in == nil {
		return nil, nil
	}
	secrets := storage.Secrets{}
	entries := func(scope string, es []*gqlschema.ConfigEntryInput) []operations.ConfigEntry {
		var out []operations.ConfigEntry
		for _, e := range es {
			ce := operations.ConfigEntry{Key: e.Key, Value: e.Value}
			if e.Secret != nil && *e.Secret {
				ce.Secret, ce.Value, ce.SecretKey = true, "", "kyma/"+scope+"/"+e.Key
				secrets[ce.SecretKey] = e.Value
			}
			out = append(out, ce)
		}
		return out
	}
	k := &operations.Kyma{Version: in.Version, Configuration: entries("_global", in.Configuration)}
	if in.Profile != nil {
		k.Profile = string(*in.Profile)
	}
	for _, c := range in.Components {
		k.Components = append(k.Components, operations.Component{
			Name: c.Component, Namespace: c.Namespace, SourceURL: deref(c.SourceURL), Configuration: entries(c.Component, c.Configuration),
		})
	}
	return k, secrets
}

// gardenerOutput is the stored cluster configuration (a GardenerConfigInput) as the API answers
// it.
func gardenerOutput(raw json.RawMessage) (*gqlschema.GardenerConfig, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var in gqlschema.GardenerConfigInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("decoding cluster configuration: %w", err)
	}
	provider, err := gqlschema.ProviderConfigOf(in.ProviderSpecificConfig)
	if err != nil {
		return nil, fmt.Errorf("converting cluster configuration: %w", err)
	}
	str := func(s string) *string { return &s }
	num := func(i int) *int { return &i }
	out := &gqlschema.GardenerConfig{
		Name: in.Name, KubernetesVersion: str(in.KubernetesVersion), Provider: str(in.Provider), TargetSecret: str(in.TargetSecret),
		Region: str(in.Region), MachineType: str(in.MachineType), MachineImage: in.MachineImage, MachineImageVersion: in.MachineImageVersion,
		DiskType: in.DiskType, VolumeSizeGb: in.VolumeSizeGb, WorkerCidr: str(in.WorkerCidr), PodsCidr: in.PodsCidr, ServicesCidr: in.ServicesCidr,
		AutoScalerMin: num(in.AutoScalerMin), AutoScalerMax: num(in.AutoScalerMax), MaxSurge: num(in.MaxSurge), MaxUnavailable: num(in.MaxUnavailable),
		Purpose: in.Purpose, LicenceType: in.LicenceType,
		EnableKubernetesVersionAutoUpdate: in.EnableKubernetesVersionAutoUpdate, EnableMachineImageVersionAutoUpdate: in.EnableMachineImageVersionAutoUpdate,
		ProviderSpecificConfig: provider, Seed: in.Seed, ExposureClassName: in.ExposureClassName,
		ShootNetworkingFilterDisabled: in.ShootNetworkingFilterDisabled, ControlPlaneFailureTolerance: in.ControlPlaneFailureTolerance,
		EuAccess: in.EuAccess, ShootAndSeedSameRegion: in.ShootAndSeedSameRegion,
	}
	if d := in.DNSConfig; d != nil {
		out.DNSConfig = &gqlschema.DNSConfig{Domain: d.Domain}
		for _, p := range d.Providers {
			if p == nil {
				continue
			}
			out.DNSConfig.Providers = append(out.DNSConfig.Providers, &gqlschema.DNSProvider{
				DomainsInclude: append([]string{}, p.DomainsInclude...), Primary: p.Primary, SecretName: p.SecretName, Type: p.Type,
			})
		}
	}
	if o := in.OidcConfig; o != nil {
		// The real schema's OIDCConfig has every field non-null: unset ones are answered empty.
		out.OidcConfig = &gqlschema.OIDCConfig{
			ClientID: o.ClientID, IssuerURL: o.IssuerURL, GroupsClaim: deref(o.GroupsClaim), SigningAlgs: append([]string{}, o.SigningAlgs...),
			UsernameClaim: deref(o.UsernameClaim), UsernamePrefix: deref(o.UsernamePrefix),
		}
	}
	return out, nil
}

func kymaOutput(k *operations.Kyma) *gqlschema.KymaConfig {
	if k == nil {
		return nil
	}
	entries := func(es []operations.ConfigEntry) []*gqlschema.ConfigEntry {
		var out []*gqlschema.ConfigEntry
		for _, e := range es {
			ce := &gqlschema.ConfigEntry{Key: e.Key, Value: e.Value}
			if e.Secret {
				secret := true
				ce.Value, ce.Secret = secretMask, &secret
			}
			out = append(out, ce)
		}
		return out
	}
	out := &gqlschema.KymaConfig{Version: &k.Version, Configuration: entries(k.Configuration)}
	if k.Profile != "" {
		p := gqlschema.KymaProfile(k.Profile)
		out.Profile = &p
	}
	for _, c := range k.Components {
		cc := &gqlschema.ComponentConfiguration{Component: c.Name, Namespace: c.Namespace, Configuration: entries(c.Configuration)}
		if c.SourceURL != "" {
			src := c.SourceURL
			cc.SourceURL = &src
		}
		out.Components = append(out.Components, cc)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
