// Package infrastructure is where runtimes' clusters come from: a named set of backends
// (gardener, kubernetes, static, simulated), one selected per runtime. The provisioner's steps
// drive a Backend; a Backend never touches KEB's operations.
package infrastructure

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Spec is what a backend needs to know about a runtime. Every Backend method is idempotent
// per RuntimeID: calling it again after a crash must not create a second cluster.
type Spec struct {
	RuntimeID    string
	OperationID  string
	Name         string
	Tenant       string
	SubAccountID string
	// Cluster is the requested cluster configuration (provider, region, machine type,
	// Kubernetes version, autoscaler, provider-specific config...).
	Cluster ClusterConfig
	// Request is what the current operation asks of the backend (create, update, hibernate,
	// delete); empty means RequestCreate. Stateless backends (simulated) need it to tell what
	// Status should report.
	Request Request
	// RequestedAt is when the current request was first made (the provisioner persists it, so
	// it stays the same across retries and restarts). Stateless backends (simulated) derive
	// progress from the time since RequestedAt; others may use it for time limits.
	RequestedAt time.Time
	// Slots is how much of a shared or dedicated host the runtime asks for (the request's
	// autoScalerMin, at least 1); backends that size runtimes multiply by it.
	Slots int
	// Version is the requested Kyma version; dedicated runtimes use it as their image tag.
	Version string
}

// Request is the kind of change the current operation asks for.
type Request string

const (
	RequestCreate    Request = "create"
	RequestUpdate    Request = "update"
	RequestHibernate Request = "hibernate"
	RequestDelete    Request = "delete"
)

// ClusterConfig is the provider-neutral cluster request (from GardenerConfigInput).
type ClusterConfig struct {
	Name              string          `json:"name"`
	KubernetesVersion string          `json:"kubernetesVersion"`
	Provider          string          `json:"provider"`
	Region            string          `json:"region"`
	TargetSecret      string          `json:"targetSecret"`
	MachineType       string          `json:"machineType"`
	MachineImage      string          `json:"machineImage,omitempty"`
	MachineImageVer   string          `json:"machineImageVersion,omitempty"`
	DiskType          string          `json:"diskType,omitempty"`
	VolumeSizeGB      int             `json:"volumeSizeGB,omitempty"`
	WorkerCidr        string          `json:"workerCidr,omitempty"`
	AutoScalerMin     int             `json:"autoScalerMin"`
	AutoScalerMax     int             `json:"autoScalerMax"`
	MaxSurge          int             `json:"maxSurge"`
	MaxUnavailable    int             `json:"maxUnavailable"`
	Purpose           string          `json:"purpose,omitempty"`
	LicenceType       string          `json:"licenceType,omitempty"`
	Seed              string          `json:"seed,omitempty"`
	ProviderConfig    json.RawMessage `json:"providerSpecificConfig,omitempty"`
	// The shoot's pod and service networks; empty leaves them to Gardener.
	PodsCidr     string `json:"podsCidr,omitempty"`
	ServicesCidr string `json:"servicesCidr,omitempty"`
	// DNS is a custom domain with its providers (the shoot's spec.dns), nil for Gardener's own.
	DNS               *DNSConfig `json:"dnsConfig,omitempty"`
	ExposureClassName string     `json:"exposureClassName,omitempty"`
	// ShootNetworkingFilterDisabled is the real provisioner's default (true) unless the
	// request said otherwise.
	ShootNetworkingFilterDisabled bool `json:"shootNetworkingFilterDisabled,omitempty"`
	// ControlPlaneFailureTolerance is "", "node" or "zone" (control plane high availability).
	ControlPlaneFailureTolerance string `json:"controlPlaneFailureTolerance,omitempty"`
	EuAccess                     bool   `json:"euAccess,omitempty"`
	ShootAndSeedSameRegion       bool   `json:"shootAndSeedSameRegion,omitempty"`
}

// DNSConfig is a shoot's custom domain and the DNS providers that serve it.
type DNSConfig struct {
	Domain    string        `json:"domain"`
	Providers []DNSProvider `json:"providers,omitempty"`
}

// DNSProvider is one DNS provider of a shoot: secretName holds its credentials in the garden.
type DNSProvider struct {
	DomainsInclude []string `json:"domainsInclude"`
	Primary        bool     `json:"primary"`
	SecretName     string   `json:"secretName"`
	Type           string   `json:"type"`
}

// Phase of the backend's last operation on a cluster.
type Phase string

const (
	PhaseInProgress Phase = "InProgress"
	PhaseSucceeded  Phase = "Succeeded"
	PhaseFailed     Phase = "Failed"
)

// Status is what a backend reports about a cluster.
type Status struct {
	// Domain is the cluster's DNS domain, empty until known.
	Domain string
	// Phase and Reason of the last operation (create, update, hibernate).
	Phase  Phase
	Reason string
	// Revision the backend has reconciled; an Update returns the revision to wait for.
	ObservedRevision int64
	Hibernated       bool
	// Allocation is what the runtime was given, for backends that allocate (static,
	// kubernetes); nil for the others.
	Allocation *Allocation
	// DoneAt, while in progress, is when the backend knows the request will be done (the
	// simulated backend, whose progress is a function of time); zero when it cannot tell. A
	// step may wait until then instead of polling.
	DoneAt time.Time
}

// Allocation is where a runtime runs and what it was given; stored with the runtime and
// shown by runtimeStatus.
type Allocation struct {
	// Host is the runtime's URL (http(s)://...).
	Host string `json:"host"`
	// AudienceURL is the audience of the JWTs the runtime accepts.
	AudienceURL  string `json:"audienceURL,omitempty"`
	CPU          int    `json:"cpu,omitempty"`
	MemoryGB     int    `json:"memoryGB,omitempty"`
	StorageBytes int64  `json:"storageBytes,omitempty"`
	DataDir      string `json:"dataDir,omitempty"`
	Slots        int    `json:"slots,omitempty"`
	// Namespace is the runtime's own namespace on its host cluster, if it has one.
	Namespace string `json:"namespace,omitempty"`
}

// Credentials are a kubeconfig confined to a runtime and when its token expires.
type Credentials struct {
	Kubeconfig string
	ExpiresAt  time.Time
}

// AdministratorBinder is implemented by backends whose runtimes are namespaces of a shared
// host: the runtime's administrators get its namespace, never the host (cluster-admin).
type AdministratorBinder interface {
	// BindAdministrators gives each user full rights on the runtime's namespace. Idempotent.
	BindAdministrators(ctx context.Context, spec Spec, users []string) error
}

// CredentialIssuer is implemented by backends that hand out credentials scoped to one runtime
// (a ServiceAccount of its own, bound to its namespace). The binding flow uses it to give
// every OSB binding an account and token of its own.
type CredentialIssuer interface {
	// IssueCredentials creates (idempotently) the account named account in the runtime's
	// namespace and returns a kubeconfig with a token of it valid for expiration.
	IssueCredentials(ctx context.Context, spec Spec, account string, expiration time.Duration) (Credentials, error)
	// RevokeCredentials deletes the account: its tokens are refused from then on.
	RevokeCredentials(ctx context.Context, spec Spec, account string) error
}

// ErrNotFound: the backend has no cluster for this runtime.
var ErrNotFound = errors.New("cluster not found")

// ErrNoCapacity: the backend cannot take another runtime (e.g. a full static pool).
var ErrNoCapacity = errors.New("no capacity left")

// ErrNotSupported: the backend cannot do what was asked (e.g. hibernate a static runtime).
// Retrying does not help.
var ErrNotSupported = errors.New("not supported by this backend")

// Backend creates, reports on, changes and deletes runtimes' clusters.
type Backend interface {
	// Create starts creating the cluster (returns at once; progress through Status).
	Create(ctx context.Context, spec Spec) error
	// Status reports the cluster; ErrNotFound if there is none.
	Status(ctx context.Context, spec Spec) (Status, error)
	// Kubeconfig returns an admin kubeconfig for the runtime once it is ready.
	Kubeconfig(ctx context.Context, spec Spec) (string, error)
	// Update applies spec.Cluster (upgradeShoot) and returns the revision Status will report
	// once the change is reconciled.
	Update(ctx context.Context, spec Spec) (int64, error)
	// Hibernate asks the cluster to hibernate; Status().Hibernated tells when it is.
	Hibernate(ctx context.Context, spec Spec) error
	// Delete starts deleting the cluster; deleting a missing cluster is not an error.
	Delete(ctx context.Context, spec Spec) error
	// Deleted reports whether the cluster is gone.
	Deleted(ctx context.Context, spec Spec) (bool, error)
}
