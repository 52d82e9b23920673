package gardener

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener/shootcontract"
)

// Shoot metadata written by the backend.
const (
	AnnotationRuntimeID   = "kcp.provisioner.kyma-project.io/runtime-id"
	AnnotationOperationID = "kcp.provisioner.kyma-project.io/operation-id"
	// AnnotationConfirmDeletion must be "true" before Gardener accepts a Shoot's deletion.
	AnnotationConfirmDeletion = "confirmation.gardener.cloud/deletion"
	LabelAccount              = "account"
	LabelSubaccount           = "subaccount"
	// AnnotationEuAccess restricts the cluster's nodes to EU access (the original
	// provisioner's annotation for euAccess).
	AnnotationEuAccess = "support.gardener.cloud/eu-access-for-cluster-nodes"
	// LabelSeedRegion is the label Gardener puts on Seeds with their region; a seed selector
	// on it keeps the control plane in the shoot's region (shootAndSeedSameRegion).
	LabelSeedRegion = "seed.gardener.cloud/region"
)

// Shoot fields and names the backend writes (shootcontract/testdata/gardener.json).
const (
	CloudProfileKind = "CloudProfile"
	// LegacyFieldsUntil is the Kubernetes version from which Gardener forbids
	// spec.cloudProfileName and spec.secretBindingName.
	LegacyFieldsUntil       = "1.34"
	AuditLogExtensionType   = "shoot-auditlog-service"
	AuditLogSecretReference = "auditlog-credentials"
	// NetworkingFilterExtensionType is the egress filter extension, enabled or disabled per
	// shoot (shootNetworkingFilterDisabled).
	NetworkingFilterExtensionType = "shoot-networking-filter"
	// IMDSv2HopLimit is the PUT response hop limit written with IMDSv2 (pods reach the
	// metadata service through one more hop than the node).
	IMDSv2HopLimit = 2
)

// WorkerName is the name of the worker pool the backend manages.
const WorkerName = "cpu-worker-0"

// ShootName is the Shoot of a runtime: spec.Cluster.Name, or "c-" and the first 7 letters and
// digits of the runtime ID.
func ShootName(spec infrastructure.Spec) string {
	if spec.Cluster.Name != "" {
		return spec.Cluster.Name
	}
	var b strings.Builder
	for _, r := range strings.ToLower(spec.RuntimeID) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			if b.Len() == 7 {
				break
			}
		}
	}
	return "c-" + b.String()
}

// newShoot builds the Shoot that Create submits.
func (b *Backend) newShoot(spec infrastructure.Spec) (*unstructured.Unstructured, error) {
	s := &unstructured.Unstructured{Object: map[string]any{}}
	s.SetAPIVersion(ShootGVR.Group + "/" + ShootGVR.Version)
	s.SetKind("Shoot")
	s.SetName(ShootName(spec))
	s.SetNamespace(b.namespace)
	s.SetAnnotations(map[string]string{AnnotationRuntimeID: spec.RuntimeID, AnnotationOperationID: spec.OperationID})
	labels := map[string]string{}
	if spec.Tenant != "" {
		labels[LabelAccount] = spec.Tenant
	}
	if spec.SubAccountID != "" {
		labels[LabelSubaccount] = spec.SubAccountID
	}
	if len(labels) > 0 {
		s.SetLabels(labels)
	}
	c := spec.Cluster
	if c.Provider == "" || c.Region == "" || c.TargetSecret == "" || c.MachineType == "" || c.KubernetesVersion == "" {
		return nil, fmt.Errorf("the cluster configuration needs provider, region, targetSecret, machineType and kubernetesVersion")
	}
	provider := providerType(c.Provider)
	pc, err := parseProviderConfig(c.ProviderConfig)
	if err != nil {
		return nil, err
	}
	profile := b.spec.cloudProfile(provider)
	if pc.CloudProfileName != "" {
		profile = pc.CloudProfileName
	}
	if profile == "" {
		return nil, fmt.Errorf("no cloud profile for provider %s: configure cloud_profile_%s (APP_GARDENER_CLOUD_PROFILE_%s) or send providerSpecificConfig's cloudProfileName",
			provider, provider, strings.ToUpper(provider))
	}
	set(s, provider, "spec", "provider", "type")
	set(s, c.Region, "spec", "region")
	// spec.cloudProfile is the reference; below Kubernetes 1.34 cloudProfileName too, which is
	// all that Gardener versions before the reference know (newer ones keep both in sync there
	// and forbid the old field from 1.34 on).
	_ = unstructured.SetNestedMap(s.Object, map[string]any{"kind": CloudProfileKind, "name": profile}, "spec", "cloudProfile")
	if !shootcontract.AtLeast(c.KubernetesVersion, LegacyFieldsUntil) {
		set(s, profile, "spec", "cloudProfileName")
	}
	// From Kubernetes 1.34 Gardener takes credentials only through a CredentialsBinding; the
	// request's targetSecret names it (a SecretBinding below 1.34).
	if shootcontract.AtLeast(c.KubernetesVersion, LegacyFieldsUntil) {
		set(s, c.TargetSecret, "spec", "credentialsBindingName")
	} else {
		set(s, c.TargetSecret, "spec", "secretBindingName")
	}
	set(s, c.Seed, "spec", "seedName")
	set(s, "calico", "spec", "networking", "type")
	// Pod and service networks, the domain and the control plane's failure tolerance cannot
	// change once the shoot exists: Create only.
	set(s, c.PodsCidr, "spec", "networking", "pods")
	set(s, c.ServicesCidr, "spec", "networking", "services")
	if c.DNS != nil {
		if err := unstructured.SetNestedMap(s.Object, dnsSpec(*c.DNS), "spec", "dns"); err != nil {
			return nil, fmt.Errorf("writing spec.dns: %w", err)
		}
	}
	set(s, c.ControlPlaneFailureTolerance, "spec", "controlPlane", "highAvailability", "failureTolerance", "type")
	if c.ShootAndSeedSameRegion {
		if err := unstructured.SetNestedStringMap(s.Object, map[string]string{LabelSeedRegion: c.Region}, "spec", "seedSelector", "matchLabels"); err != nil {
			return nil, fmt.Errorf("writing spec.seedSelector: %w", err)
		}
	}
	if c.EuAccess {
		ann := s.GetAnnotations()
		ann[AnnotationEuAccess] = "true"
		s.SetAnnotations(ann)
	}
	if b.spec.AuditLogsPolicyConfigMap != "" {
		set(s, b.spec.AuditLogsPolicyConfigMap, "spec", "kubernetes", "kubeAPIServer", "auditConfig", "auditPolicy", "configMapRef", "name")
	}
	if b.spec.AuditLogsTenant != "" {
		if err := unstructured.SetNestedSlice(s.Object, []any{map[string]any{
			"type": AuditLogExtensionType,
			"providerConfig": map[string]any{
				"apiVersion":          "service.auditlog.extensions.gardener.cloud/v1alpha1",
				"kind":                "AuditlogConfig",
				"type":                "standard",
				"tenantID":            b.spec.AuditLogsTenant,
				"serviceURL":          b.spec.AuditLogServiceURL,
				"secretReferenceName": AuditLogSecretReference,
			},
		}}, "spec", "extensions"); err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedSlice(s.Object, []any{map[string]any{
			"name":        AuditLogSecretReference,
			"resourceRef": map[string]any{"apiVersion": "v1", "kind": "Secret", "name": b.spec.AuditLogSecretName},
		}}, "spec", "resources"); err != nil {
			return nil, err
		}
	}
	if provider == "openstack" {
		if pc.FloatingPoolName == "" {
			pc.FloatingPoolName = b.spec.OpenStackFloatingPoolName
		}
		if pc.LoadBalancerProvider == "" {
			pc.LoadBalancerProvider = b.spec.OpenStackLoadBalancerProvider
		}
		if pc.FloatingPoolName == "" || pc.LoadBalancerProvider == "" {
			return nil, errors.New("OpenStack needs a floating pool and a load balancer provider: send openStackConfig's floatingPoolName and loadBalancerProvider, or configure openstack_floating_pool_name and openstack_load_balancer_provider (APP_GARDENER_OPENSTACK_*)")
		}
	}
	if infra, cp := providerConfigs(provider, c, pc); infra != nil {
		if err := unstructured.SetNestedMap(s.Object, infra, "spec", "provider", "infrastructureConfig"); err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedMap(s.Object, cp, "spec", "provider", "controlPlaneConfig"); err != nil {
			return nil, err
		}
	}
	if err := applyCluster(s, spec, pc); err != nil {
		return nil, err
	}
	return s, nil
}

// applyCluster writes the changeable fields of spec.Cluster that are set into the Shoot (for
// Create and Update).
func applyCluster(s *unstructured.Unstructured, spec infrastructure.Spec, pc providerConfig) error {
	c := spec.Cluster
	set(s, c.KubernetesVersion, "spec", "kubernetes", "version")
	if err := migrateLegacyFields(s); err != nil {
		return err
	}
	set(s, c.Purpose, "spec", "purpose")
	set(s, c.WorkerCidr, "spec", "networking", "nodes")
	set(s, c.ExposureClassName, "spec", "exposureClassName")
	if err := setExtension(s, map[string]any{"type": NetworkingFilterExtensionType, "disabled": c.ShootNetworkingFilterDisabled}); err != nil {
		return err
	}

	workers, _, err := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	if err != nil {
		return fmt.Errorf("reading spec.provider.workers: %w", err)
	}
	var w map[string]any
	if len(workers) > 0 {
		if w, _ = workers[0].(map[string]any); w == nil {
			return fmt.Errorf("spec.provider.workers[0] is not an object")
		}
	} else {
		w = map[string]any{"name": WorkerName}
		workers = []any{w}
	}
	wu := &unstructured.Unstructured{Object: w}
	set(wu, c.MachineType, "machine", "type")
	set(wu, c.MachineImage, "machine", "image", "name")
	set(wu, c.MachineImageVer, "machine", "image", "version")
	set(wu, c.DiskType, "volume", "type")
	if c.VolumeSizeGB > 0 {
		set(wu, fmt.Sprintf("%dGi", c.VolumeSizeGB), "volume", "size")
	}
	setInt(wu, c.AutoScalerMin, "minimum")
	setInt(wu, c.AutoScalerMax, "maximum")
	setInt(wu, c.MaxSurge, "maxSurge")
	setInt(wu, c.MaxUnavailable, "maxUnavailable")
	if zones := pc.zones(); len(zones) > 0 {
		z := make([]any, len(zones))
		for i, v := range zones {
			z[i] = v
		}
		w["zones"] = z
	}
	if pc.EnableIMDSv2 != nil && providerType(c.Provider) == "aws" {
		if *pc.EnableIMDSv2 {
			w["providerConfig"] = map[string]any{
				"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1",
				"kind":       "WorkerConfig",
				"instanceMetadataOptions": map[string]any{
					"httpTokens":              "required",
					"httpPutResponseHopLimit": int64(IMDSv2HopLimit),
				},
			}
		} else if cfg, ok := w["providerConfig"].(map[string]any); ok {
			delete(cfg, "instanceMetadataOptions")
		}
	}
	workers[0] = wu.Object
	if err := unstructured.SetNestedSlice(s.Object, workers, "spec", "provider", "workers"); err != nil {
		return fmt.Errorf("writing spec.provider.workers: %w", err)
	}
	if spec.OperationID != "" {
		ann := s.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationOperationID] = spec.OperationID
		s.SetAnnotations(ann)
	}
	return nil
}

// migrateLegacyFields moves a Shoot upgraded to Kubernetes 1.34 or later off the fields
// Gardener forbids from then on: spec.cloudProfileName (kept as spec.cloudProfile) and
// spec.secretBindingName (moved to spec.credentialsBindingName, which Gardener allows as the
// one change of a SecretBinding; the project needs a CredentialsBinding of that name).
func migrateLegacyFields(s *unstructured.Unstructured) error {
	version, _, _ := unstructured.NestedString(s.Object, "spec", "kubernetes", "version")
	if !shootcontract.AtLeast(version, LegacyFieldsUntil) {
		return nil
	}
	if name, _, _ := unstructured.NestedString(s.Object, "spec", "cloudProfileName"); name != "" {
		if ref, _, _ := unstructured.NestedMap(s.Object, "spec", "cloudProfile"); len(ref) == 0 {
			if err := unstructured.SetNestedMap(s.Object, map[string]any{"kind": CloudProfileKind, "name": name}, "spec", "cloudProfile"); err != nil {
				return fmt.Errorf("writing spec.cloudProfile: %w", err)
			}
		}
		unstructured.RemoveNestedField(s.Object, "spec", "cloudProfileName")
	}
	if name, _, _ := unstructured.NestedString(s.Object, "spec", "secretBindingName"); name != "" {
		if cur, _, _ := unstructured.NestedString(s.Object, "spec", "credentialsBindingName"); cur == "" {
			set(s, name, "spec", "credentialsBindingName")
		}
		unstructured.RemoveNestedField(s.Object, "spec", "secretBindingName")
	}
	return nil
}

// dnsSpec is the shoot's spec.dns for a custom domain: its providers with their credentials
// (secretName) and the domains each serves.
func dnsSpec(d infrastructure.DNSConfig) map[string]any {
	out := map[string]any{"domain": d.Domain}
	if len(d.Providers) == 0 {
		return out
	}
	providers := make([]any, 0, len(d.Providers))
	for _, p := range d.Providers {
		m := map[string]any{"primary": p.Primary}
		if p.Type != "" {
			m["type"] = p.Type
		}
		if p.SecretName != "" {
			m["secretName"] = p.SecretName
		}
		if len(p.DomainsInclude) > 0 {
			inc := make([]any, len(p.DomainsInclude))
			for i, v := range p.DomainsInclude {
				inc[i] = v
			}
			m["domains"] = map[string]any{"include": inc}
		}
		providers = append(providers, m)
	}
	out["providers"] = providers
	return out
}

// setExtension replaces spec.extensions' entry of ext's type with ext, or appends it.
func setExtension(s *unstructured.Unstructured, ext map[string]any) error {
	list, _, err := unstructured.NestedSlice(s.Object, "spec", "extensions")
	if err != nil {
		return fmt.Errorf("reading spec.extensions: %w", err)
	}
	replaced := false
	for i, e := range list {
		if m, ok := e.(map[string]any); ok && m["type"] == ext["type"] {
			list[i] = ext
			replaced = true
		}
	}
	if !replaced {
		list = append(list, ext)
	}
	if err := unstructured.SetNestedSlice(s.Object, list, "spec", "extensions"); err != nil {
		return fmt.Errorf("writing spec.extensions: %w", err)
	}
	return nil
}

// set writes a non-empty string.
func set(s *unstructured.Unstructured, v string, path ...string) {
	if v == "" {
		return
	}
	// Cannot fail: the value is a string and intermediate fields are created as maps.
	_ = unstructured.SetNestedField(s.Object, v, path...)
}

// setInt writes a positive int.
func setInt(s *unstructured.Unstructured, v int, path ...string) {
	if v <= 0 {
		return
	}
	_ = unstructured.SetNestedField(s.Object, int64(v), path...)
}

// providerType maps the provisioner's provider names (GCP, Azure, AWS, OpenStack) to
// Gardener's provider types.
func providerType(p string) string {
	return strings.ToLower(p)
}

// providerConfig is the union of the provisioner's providerSpecificConfig variants.
type providerConfig struct {
	Zones    []string `json:"zones"`
	VnetCidr string   `json:"vnetCidr"`
	VpcCidr  string   `json:"vpcCidr"`
	AwsZones []struct {
		Name         string `json:"name"`
		WorkerCidr   string `json:"workerCidr"`
		PublicCidr   string `json:"publicCidr"`
		InternalCidr string `json:"internalCidr"`
	} `json:"awsZones"`
	FloatingPoolName     string `json:"floatingPoolName"`
	LoadBalancerProvider string `json:"loadBalancerProvider"`
	CloudProfileName     string `json:"cloudProfileName"`
	// Azure: zones with a subnet each (and a NAT gateway when enabled).
	AzureZones []struct {
		Name int    `json:"name"`
		Cidr string `json:"cidr"`
	} `json:"azureZones"`
	EnableNatGateway             *bool `json:"enableNatGateway"`
	IdleConnectionTimeoutMinutes *int  `json:"idleConnectionTimeoutMinutes"`
	// AWS: require IMDSv2 on the workers' instances.
	EnableIMDSv2 *bool `json:"enableIMDSv2"`
}

func parseProviderConfig(raw json.RawMessage) (providerConfig, error) {
	var pc providerConfig
	if len(raw) == 0 || string(raw) == "null" {
		return pc, nil
	}
	// The provisioner's input may wrap the config per provider ({"gcpConfig": {...}}).
	var wrapped map[string]json.RawMessage
	if err := json.Unmarshal(raw, &wrapped); err != nil {
		return pc, fmt.Errorf("decoding providerSpecificConfig: %w", err)
	}
	for _, k := range []string{"gcpConfig", "azureConfig", "awsConfig", "openStackConfig"} {
		if inner, ok := wrapped[k]; ok && len(wrapped) == 1 {
			raw = inner
		}
	}
	if err := json.Unmarshal(raw, &pc); err != nil {
		return pc, fmt.Errorf("decoding providerSpecificConfig: %w", err)
	}
	return pc, nil
}

func (pc providerConfig) zones() []string {
	if len(pc.AzureZones) > 0 {
		z := make([]string, len(pc.AzureZones))
		for i, az := range pc.AzureZones {
			z[i] = strconv.Itoa(az.Name)
		}
		return z
	}
	if len(pc.Zones) > 0 {
		return pc.Zones
	}
	var z []string
	for _, az := range pc.AwsZones {
		z = append(z, az.Name)
	}
	return z
}

// providerConfigs returns the provider extension's InfrastructureConfig and ControlPlaneConfig
// for the providers KEB uses (nil for others).
func providerConfigs(provider string, c infrastructure.ClusterConfig, pc providerConfig) (map[string]any, map[string]any) {
	obj := func(apiGroup, kind string, fields map[string]any) map[string]any {
		m := map[string]any{"apiVersion": apiGroup + "/v1alpha1", "kind": kind}
		for k, v := range fields {
			m[k] = v
		}
		return m
	}
	switch provider {
	case "gcp":
		g := "gcp.provider.extensions.gardener.cloud"
		cp := map[string]any{}
		if z := pc.zones(); len(z) > 0 {
			cp["zone"] = z[0]
		}
		return obj(g, "InfrastructureConfig", map[string]any{"networks": map[string]any{"workers": c.WorkerCidr}}),
			obj(g, "ControlPlaneConfig", cp)
	case "azure":
		g := "azure.provider.extensions.gardener.cloud"
		networks := map[string]any{"vnet": map[string]any{"cidr": pc.VnetCidr}}
		natGateway := func() map[string]any {
			if pc.EnableNatGateway == nil || !*pc.EnableNatGateway {
				return nil
			}
			ng := map[string]any{"enabled": true}
			if pc.IdleConnectionTimeoutMinutes != nil {
				ng["idleConnectionTimeoutMinutes"] = int64(*pc.IdleConnectionTimeoutMinutes)
			}
			return ng
		}
		if len(pc.AzureZones) > 0 {
			// Zones with a subnet each replace the single workers network.
			zones := make([]any, 0, len(pc.AzureZones))
			for _, z := range pc.AzureZones {
				zone := map[string]any{"name": int64(z.Name), "cidr": z.Cidr}
				if ng := natGateway(); ng != nil {
					zone["natGateway"] = ng
				}
				zones = append(zones, zone)
			}
			networks["zones"] = zones
		} else {
			networks["workers"] = c.WorkerCidr
			if ng := natGateway(); ng != nil {
				networks["natGateway"] = ng
			}
		}
		return obj(g, "InfrastructureConfig", map[string]any{
				"networks": networks,
				"zoned":    len(pc.Zones) > 0 || len(pc.AzureZones) > 0,
			}),
			obj(g, "ControlPlaneConfig", nil)
	case "aws":
		g := "aws.provider.extensions.gardener.cloud"
		zones := make([]any, 0, len(pc.AwsZones))
		for _, z := range pc.AwsZones {
			zones = append(zones, map[string]any{"name": z.Name, "workers": z.WorkerCidr, "public": z.PublicCidr, "internal": z.InternalCidr})
		}
		return obj(g, "InfrastructureConfig", map[string]any{
				"networks": map[string]any{"vpc": map[string]any{"cidr": pc.VpcCidr}, "zones": zones},
			}),
			obj(g, "ControlPlaneConfig", nil)
	case "openstack":
		g := "openstack.provider.extensions.gardener.cloud"
		return obj(g, "InfrastructureConfig", map[string]any{
				"floatingPoolName": pc.FloatingPoolName,
				"networks":         map[string]any{"workers": c.WorkerCidr},
			}),
			obj(g, "ControlPlaneConfig", map[string]any{"loadBalancerProvider": pc.LoadBalancerProvider})
	}
	return nil, nil
}
