package gardener

import (
	"encoding/json"
	"errors"
	"fmt"
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
)

// Shoot fields and names the backend writes (shootcontract/testdata/gardener.json).
const (
	CloudProfileKind = "CloudProfile"
	// LegacyFieldsUntil is the Kubernetes version from which Gardener forbids
	// spec.cloudProfileName and spec.secretBindingName.
	LegacyFieldsUntil       = "1.34"
	AuditLogExtensionType   = "shoot-auditlog-service"
	AuditLogSecretReference = "auditlog-credentials"
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
		return obj(g, "InfrastructureConfig", map[string]any{
				"networks": map[string]any{"vnet": map[string]any{"cidr": pc.VnetCidr}, "workers": c.WorkerCidr},
				"zoned":    len(pc.Zones) > 0,
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
