// Package static is the backend of a pool of pre-provisioned clusters ("hosts"), each with a
// number of slots. Creating a runtime allocates slots on the host with the most free slots,
// through storage.StaticAllocations, whose database lock makes concurrent creations safe across
// replicas. The pool is named after the provisioner set entry.
//
// Spec (seed 004's static example is accepted as written):
//
//	{"runtimes": [{"host": "http://localhost:9091", "slots": 50, "data_dir": "/mnt/data", "audience_url": "http://localhost:8081"},
//	              {"host": "https://b.example.com", "slots": 10, "kubeconfig_path": "/etc/b.yaml"}],
//	 "slots_per_runtime": 1, "token_expiration_seconds": 3600}
//
// host is the runtime's URL (or a name, then "domain" is required); domain defaults to the
// URL's host name. A host with a kubeconfig (or kubeconfig_path) gives each of its runtimes a
// namespace "runtime-<runtime ID>" and a ServiceAccount of its own bound to it: the runtime's
// kubeconfig carries a short-lived token of that account, never the host's credentials. A host
// without one has no cluster credentials to hand out.
package static

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/kubeconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/scoped"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Type is the backend type name in the provisioner set.
const Type = "static"

// WarnUsedPercent: an allocation that leaves a host above this share of its slots used logs a
// capacity warning.
const WarnUsedPercent = 80

// Spec is a static pool.
type Spec struct {
	Runtimes []Host `json:"runtimes"`
	// SlotsPerRuntime is how many slots one runtime takes (default 1).
	SlotsPerRuntime int `json:"slots_per_runtime"`
	// TokenExpirationSeconds: how long runtimes' kubeconfigs are valid (default 3600, at
	// least 600).
	TokenExpirationSeconds int `json:"token_expiration_seconds"`
}

// DefaultTokenExpirationSeconds is the default lifetime of a runtime's kubeconfig.
const DefaultTokenExpirationSeconds = 3600

// RuntimeAccount is the ServiceAccount of a runtime's own kubeconfig.
const RuntimeAccount = "runtime"

// Host is one pre-provisioned runtime host of the pool.
type Host struct {
	// Host is the runtime's URL (seed 004) or a name.
	Host  string `json:"host"`
	Slots int    `json:"slots"`
	// DataDir is where the runtime keeps its data.
	DataDir string `json:"data_dir"`
	// AudienceURL is the audience of the JWTs the runtime accepts.
	AudienceURL    string `json:"audience_url"`
	Kubeconfig     string `json:"kubeconfig"`
	KubeconfigPath string `json:"kubeconfig_path"`
	Domain         string `json:"domain"`
}

// Validate checks the spec and fills in defaults.
func (s *Spec) Validate() error {
	if s.SlotsPerRuntime == 0 {
		s.SlotsPerRuntime = 1
	}
	if s.SlotsPerRuntime < 0 {
		return fmt.Errorf("spec.slots_per_runtime must be > 0")
	}
	if s.TokenExpirationSeconds == 0 {
		s.TokenExpirationSeconds = DefaultTokenExpirationSeconds
	}
	if time.Duration(s.TokenExpirationSeconds)*time.Second < scoped.MinExpiration {
		return fmt.Errorf("spec.token_expiration_seconds must be at least %d", int(scoped.MinExpiration/time.Second))
	}
	if len(s.Runtimes) == 0 {
		return errors.New("spec.runtimes must list at least one host")
	}
	seen := map[string]int{}
	fits := false
	for i := range s.Runtimes {
		h := &s.Runtimes[i]
		field := fmt.Sprintf("spec.runtimes[%d]", i)
		switch {
		case h.Host == "":
			return fmt.Errorf("%s.host is required", field)
		case h.Slots <= 0:
			return fmt.Errorf("%s.slots must be > 0", field)
		}
		if strings.Contains(h.Host, "://") {
			u, err := url.Parse(h.Host)
			if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return fmt.Errorf("%s.host %q must be an http(s) URL or a name", field, h.Host)
			}
			if h.Domain == "" {
				h.Domain = u.Hostname()
			}
		}
		if h.Domain == "" {
			return fmt.Errorf("%s.domain is required when host is not a URL", field)
		}
		if h.AudienceURL != "" {
			if u, err := url.Parse(h.AudienceURL); err != nil || u.Hostname() == "" {
				return fmt.Errorf("%s.audience_url %q must be a URL", field, h.AudienceURL)
			}
		}
		if h.DataDir != "" && !strings.HasPrefix(h.DataDir, "/") {
			return fmt.Errorf("%s.data_dir %q must be an absolute path", field, h.DataDir)
		}
		if j, dup := seen[h.Host]; dup {
			return fmt.Errorf("%s.host %q is already spec.runtimes[%d].host", field, h.Host, j)
		}
		seen[h.Host] = i
		if h.Kubeconfig != "" || h.KubeconfigPath != "" {
			if err := h.source().Validate(field); err != nil {
				return err
			}
		}
		fits = fits || h.Slots >= s.SlotsPerRuntime
	}
	if !fits {
		return fmt.Errorf("spec.slots_per_runtime is %d but no host has that many slots", s.SlotsPerRuntime)
	}
	return nil
}

func (h Host) source() kubeconfig.Source {
	return kubeconfig.Source{Inline: h.Kubeconfig, Path: h.KubeconfigPath}
}

// Backend allocates runtimes to the hosts of one pool.
type Backend struct {
	pool   string
	spec   Spec
	hosts  map[string]Host
	allocs storage.StaticAllocations
	log    logrus.FieldLogger
}

var (
	_ infrastructure.Backend             = (*Backend)(nil)
	_ infrastructure.CredentialIssuer    = (*Backend)(nil)
	_ infrastructure.AdministratorBinder = (*Backend)(nil)
)

// New returns the backend of the pool named pool (validating spec).
func New(pool string, spec Spec, allocs storage.StaticAllocations, log logrus.FieldLogger) (*Backend, error) {
	if pool == "" {
		return nil, errors.New("static pool name is empty")
	}
	if allocs == nil {
		return nil, errors.New("static pool needs the static allocations storage")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		log = l
	}
	hosts := make(map[string]Host, len(spec.Runtimes))
	for _, h := range spec.Runtimes {
		hosts[h.Host] = h
	}
	return &Backend{pool: pool, spec: spec, hosts: hosts, allocs: allocs, log: log.WithField("pool", pool)}, nil
}

// Factory builds the backend of a provisioner set entry; the pool is the entry's name.
func Factory(_ context.Context, e infrastructure.Entry, deps infrastructure.Deps) (infrastructure.Backend, error) {
	var spec Spec
	if err := infrastructure.DecodeSpec(e.Spec, &spec); err != nil {
		return nil, err
	}
	return New(e.Name, spec, deps.Static, deps.Log)
}

func (b *Backend) storageHosts() []storage.StaticHost {
	out := make([]storage.StaticHost, len(b.spec.Runtimes))
	for i, h := range b.spec.Runtimes {
		out[i] = storage.StaticHost{Host: h.Host, Slots: h.Slots}
	}
	return out
}

// Create allocates slots for the runtime (again the same ones if it already has them).
func (b *Backend) Create(ctx context.Context, spec infrastructure.Spec) error {
	a, err := b.allocs.AllocateSlots(ctx, b.pool, b.storageHosts(), spec.RuntimeID, b.spec.SlotsPerRuntime)
	if errors.Is(err, storage.ErrNoCapacity) {
		return fmt.Errorf("static pool %q has no host with %d free slot(s) for runtime %s: %w", b.pool, b.spec.SlotsPerRuntime, spec.RuntimeID, infrastructure.ErrNoCapacity)
	}
	if err != nil {
		return fmt.Errorf("creating runtime %s in static pool %q: %w", spec.RuntimeID, b.pool, err)
	}
	log := b.log.WithFields(logrus.Fields{"runtime_id": spec.RuntimeID, "host": a.Host, "slots": a.Slots})
	log.Info("runtime allocated to a static host")
	b.warnIfFull(ctx, log, a.Host)
	return nil
}

// warnIfFull logs a warning when host has more than WarnUsedPercent of its slots in use.
func (b *Backend) warnIfFull(ctx context.Context, log logrus.FieldLogger, host string) {
	h, ok := b.hosts[host]
	if !ok {
		return
	}
	used, err := b.allocs.UsedSlots(ctx, b.pool)
	if err != nil {
		log.WithError(err).Warn("could not check the static pool's capacity")
		return
	}
	if used[host]*100 > h.Slots*WarnUsedPercent {
		log.WithFields(logrus.Fields{"used_slots": used[host], "host_slots": h.Slots}).
			Warnf("static host is over %d%% full", WarnUsedPercent)
	}
}

// host returns the configured host of the runtime's allocation and the allocation.
func (b *Backend) host(ctx context.Context, spec infrastructure.Spec) (Host, storage.StaticAllocation, error) {
	a, err := b.allocs.GetAllocation(ctx, b.pool, spec.RuntimeID)
	if errors.Is(err, storage.ErrNotFound) {
		return Host{}, a, fmt.Errorf("runtime %s has no allocation in static pool %q: %w", spec.RuntimeID, b.pool, infrastructure.ErrNotFound)
	}
	if err != nil {
		return Host{}, a, err
	}
	h, ok := b.hosts[a.Host]
	if !ok {
		return Host{}, a, fmt.Errorf("runtime %s is allocated to host %q, which is no longer in static pool %q", spec.RuntimeID, a.Host, b.pool)
	}
	return h, a, nil
}

// Status is Succeeded, with the host's domain and the allocation, once the runtime has one.
func (b *Backend) Status(ctx context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	h, a, err := b.host(ctx, spec)
	if err != nil {
		return infrastructure.Status{}, fmt.Errorf("getting the status of runtime %s: %w", spec.RuntimeID, err)
	}
	alloc := &infrastructure.Allocation{Host: h.Host, AudienceURL: h.AudienceURL, DataDir: h.DataDir, Slots: a.Slots}
	if h.hasCluster() {
		alloc.Namespace = Namespace(spec.RuntimeID)
	}
	return infrastructure.Status{Domain: h.Domain, Phase: infrastructure.PhaseSucceeded, Allocation: alloc}, nil
}

func (h Host) hasCluster() bool { return h.Kubeconfig != "" || h.KubeconfigPath != "" }

// Namespace is a runtime's own namespace on its host: "runtime-<runtime ID>", with a hash of
// the ID when that would be too long or not a name.
func Namespace(runtimeID string) string {
	ns := "runtime-" + strings.ToLower(runtimeID)
	if len(ns) <= 63 && nameOK(ns) {
		return ns
	}
	sum := sha256.Sum256([]byte(runtimeID))
	return "runtime-" + hex.EncodeToString(sum[:12])
}

func nameOK(s string) bool {
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(s)-1
		if !ok {
			return false
		}
	}
	return true
}

func (h Host) issuer() (*scoped.Issuer, error) {
	cfg, err := h.source().RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("host %q: %w", h.Host, err)
	}
	return scoped.New(cfg)
}

// Kubeconfig is a kubeconfig of the runtime's own ServiceAccount on its host, confined to its
// namespace; empty when the host has no cluster credentials.
func (b *Backend) Kubeconfig(ctx context.Context, spec infrastructure.Spec) (string, error) {
	h, _, err := b.host(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("getting the kubeconfig of runtime %s: %w", spec.RuntimeID, err)
	}
	if !h.hasCluster() {
		return "", nil
	}
	c, err := b.IssueCredentials(ctx, spec, RuntimeAccount, time.Duration(b.spec.TokenExpirationSeconds)*time.Second)
	if err != nil {
		return "", fmt.Errorf("getting the kubeconfig of runtime %s: %w", spec.RuntimeID, err)
	}
	return c.Kubeconfig, nil
}

// IssueCredentials creates account in the runtime's namespace on its host and returns a
// kubeconfig with a token of it valid for expiration.
func (b *Backend) IssueCredentials(ctx context.Context, spec infrastructure.Spec, account string, expiration time.Duration) (infrastructure.Credentials, error) {
	h, _, err := b.host(ctx, spec)
	if err != nil {
		return infrastructure.Credentials{}, err
	}
	if !h.hasCluster() {
		return infrastructure.Credentials{}, fmt.Errorf("static host %q has no kubeconfig: %w", h.Host, infrastructure.ErrNotSupported)
	}
	iss, err := h.issuer()
	if err != nil {
		return infrastructure.Credentials{}, err
	}
	ns := Namespace(spec.RuntimeID)
	if err := iss.Grant(ctx, ns, account, runtimeLabels(spec.RuntimeID)); err != nil {
		return infrastructure.Credentials{}, err
	}
	c, err := iss.Kubeconfig(ctx, ns, account, expiration)
	if err != nil {
		return infrastructure.Credentials{}, err
	}
	return infrastructure.Credentials{Kubeconfig: c.Kubeconfig, ExpiresAt: c.ExpiresAt}, nil
}

// BindAdministrators gives the users full rights on the runtime's namespace on its host only;
// a host without a kubeconfig has no cluster to bind them to.
func (b *Backend) BindAdministrators(ctx context.Context, spec infrastructure.Spec, users []string) error {
	h, _, err := b.host(ctx, spec)
	if err != nil {
		return err
	}
	if !h.hasCluster() {
		b.log.WithField("runtime_id", spec.RuntimeID).Info("static host has no kubeconfig: no administrators to bind")
		return nil
	}
	iss, err := h.issuer()
	if err != nil {
		return err
	}
	labels := runtimeLabels(spec.RuntimeID)
	if err := iss.Grant(ctx, Namespace(spec.RuntimeID), RuntimeAccount, labels); err != nil {
		return err
	}
	return iss.BindUsers(ctx, Namespace(spec.RuntimeID), users, labels)
}

func runtimeLabels(runtimeID string) map[string]string {
	return map[string]string{"kyma-project.io/runtime-id": runtimeID, "app.kubernetes.io/managed-by": "keb"}
}

// RevokeCredentials deletes account from the runtime's namespace; its tokens stop working.
func (b *Backend) RevokeCredentials(ctx context.Context, spec infrastructure.Spec, account string) error {
	h, _, err := b.host(ctx, spec)
	if err != nil {
		return err
	}
	if !h.hasCluster() {
		return nil
	}
	iss, err := h.issuer()
	if err != nil {
		return err
	}
	return iss.Revoke(ctx, Namespace(spec.RuntimeID), account)
}

// Update changes nothing (a host is shared); it returns revision 0, which Status reports.
func (b *Backend) Update(ctx context.Context, spec infrastructure.Spec) (int64, error) {
	if _, _, err := b.host(ctx, spec); err != nil {
		return 0, fmt.Errorf("updating runtime %s: %w", spec.RuntimeID, err)
	}
	return 0, nil
}

// Hibernate is not supported: hosts are shared.
func (b *Backend) Hibernate(_ context.Context, spec infrastructure.Spec) error {
	return fmt.Errorf("hibernating runtime %s: static pool %q runs on shared hosts: %w", spec.RuntimeID, b.pool, infrastructure.ErrNotSupported)
}

// Delete removes the runtime's namespace and account from its host (if it has a cluster) and
// releases the runtime's slots.
func (b *Backend) Delete(ctx context.Context, spec infrastructure.Spec) error {
	h, _, err := b.host(ctx, spec)
	if err != nil && !errors.Is(err, infrastructure.ErrNotFound) {
		return fmt.Errorf("deleting runtime %s: %w", spec.RuntimeID, err)
	}
	if err == nil && h.hasCluster() {
		iss, err := h.issuer()
		if err != nil {
			return fmt.Errorf("deleting runtime %s: %w", spec.RuntimeID, err)
		}
		if err := iss.Remove(ctx, Namespace(spec.RuntimeID), RuntimeAccount); err != nil {
			return fmt.Errorf("deleting runtime %s: %w", spec.RuntimeID, err)
		}
	}
	if err := b.allocs.ReleaseSlots(ctx, b.pool, spec.RuntimeID); err != nil {
		return fmt.Errorf("deleting runtime %s: %w", spec.RuntimeID, err)
	}
	b.log.WithField("runtime_id", spec.RuntimeID).Info("runtime's static slots released")
	return nil
}

// Deleted is true when the runtime has no allocation.
func (b *Backend) Deleted(ctx context.Context, spec infrastructure.Spec) (bool, error) {
	_, err := b.allocs.GetAllocation(ctx, b.pool, spec.RuntimeID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("checking whether runtime %s is deleted: %w", spec.RuntimeID, err)
	}
	return false, nil
}
