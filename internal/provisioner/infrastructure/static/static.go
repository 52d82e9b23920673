// Package static is the backend of a pool of pre-provisioned clusters ("hosts"), each with a
// number of slots. Creating a runtime allocates slots on the host with the most free slots,
// through storage.StaticAllocations, whose database lock makes concurrent creations safe across
// replicas. The pool is named after the provisioner set entry.
//
// Spec:
//
//	{"runtimes": [{"host": "cluster-a", "slots": 10, "kubeconfig_path": "/etc/a.yaml", "domain": "a.example.com"},
//	              {"host": "cluster-b", "slots": 10, "kubeconfig": "apiVersion: v1 ...", "domain": "b.example.com"}],
//	 "slots_per_runtime": 1}
package static

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/internal/kubeconfig"
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
}

// Host is one pre-provisioned cluster of the pool.
type Host struct {
	Host           string `json:"host"`
	Slots          int    `json:"slots"`
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
	if len(s.Runtimes) == 0 {
		return errors.New("spec.runtimes must list at least one host")
	}
	seen := map[string]int{}
	fits := false
	for i, h := range s.Runtimes {
		field := fmt.Sprintf("spec.runtimes[%d]", i)
		switch {
		case h.Host == "":
			return fmt.Errorf("%s.host is required", field)
		case h.Slots <= 0:
			return fmt.Errorf("%s.slots must be > 0", field)
		case h.Domain == "":
			return fmt.Errorf("%s.domain is required", field)
		}
		if j, dup := seen[h.Host]; dup {
			return fmt.Errorf("%s.host %q is already spec.runtimes[%d].host", field, h.Host, j)
		}
		seen[h.Host] = i
		if err := h.source().Validate(field); err != nil {
			return err
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

var _ infrastructure.Backend = (*Backend)(nil)

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

// host returns the configured host of the runtime's allocation.
func (b *Backend) host(ctx context.Context, spec infrastructure.Spec) (Host, error) {
	a, err := b.allocs.GetAllocation(ctx, b.pool, spec.RuntimeID)
	if errors.Is(err, storage.ErrNotFound) {
		return Host{}, fmt.Errorf("runtime %s has no allocation in static pool %q: %w", spec.RuntimeID, b.pool, infrastructure.ErrNotFound)
	}
	if err != nil {
		return Host{}, err
	}
	h, ok := b.hosts[a.Host]
	if !ok {
		return Host{}, fmt.Errorf("runtime %s is allocated to host %q, which is no longer in static pool %q", spec.RuntimeID, a.Host, b.pool)
	}
	return h, nil
}

// Status is Succeeded, with the host's domain, once the runtime has an allocation.
func (b *Backend) Status(ctx context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	h, err := b.host(ctx, spec)
	if err != nil {
		return infrastructure.Status{}, fmt.Errorf("getting the status of runtime %s: %w", spec.RuntimeID, err)
	}
	return infrastructure.Status{Domain: h.Domain, Phase: infrastructure.PhaseSucceeded}, nil
}

// Kubeconfig is the kubeconfig of the runtime's host.
func (b *Backend) Kubeconfig(ctx context.Context, spec infrastructure.Spec) (string, error) {
	h, err := b.host(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("getting the kubeconfig of runtime %s: %w", spec.RuntimeID, err)
	}
	kc, err := h.source().Read()
	if err != nil {
		return "", fmt.Errorf("getting the kubeconfig of runtime %s from host %q: %w", spec.RuntimeID, h.Host, err)
	}
	return string(kc), nil
}

// Update changes nothing (a host is shared); it returns revision 0, which Status reports.
func (b *Backend) Update(ctx context.Context, spec infrastructure.Spec) (int64, error) {
	if _, err := b.host(ctx, spec); err != nil {
		return 0, fmt.Errorf("updating runtime %s: %w", spec.RuntimeID, err)
	}
	return 0, nil
}

// Hibernate is not supported: hosts are shared.
func (b *Backend) Hibernate(_ context.Context, spec infrastructure.Spec) error {
	return fmt.Errorf("hibernating runtime %s: static pool %q runs on shared hosts: %w", spec.RuntimeID, b.pool, infrastructure.ErrNotSupported)
}

// Delete releases the runtime's slots.
func (b *Backend) Delete(ctx context.Context, spec infrastructure.Spec) error {
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
