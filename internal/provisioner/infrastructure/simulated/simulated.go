// Package simulated is the embedded default backend: clusters that exist only as arithmetic on
// the clock. It keeps no state at all, so it survives restarts and agrees with itself across
// replicas: everything Status reports is derived from the time since Spec.RequestedAt, which
// the caller must supply (and keep stable across retries) for Status, Update and Deleted.
// Spec.Request tells which request RequestedAt belongs to (empty means create).
//
// Spec (all durations are Go duration strings such as "1.5s" or numbers of seconds):
//
//	{"domainDelay": "1s", "creationDuration": "3s", "updateDuration": "2s",
//	 "hibernationDuration": "2s", "deletionDuration": "2s",
//	 "installationDuration": "3s", "agentConnectionDuration": "2s",
//	 "failRuntimeNames": ["doomed"], "failureRate": 0.1}
//
// Creation of a runtime whose name is in failRuntimeNames fails; so does creation of a fraction
// failureRate of the runtimes, chosen by a hash of the runtime ID so every retry agrees.
// Kubeconfig returns a kubeconfig whose server is
// simulated://<runtimeID>?installationDuration=<d>&agentConnectionDuration=<d>: the runtime
// client opens a simulated runtime from it, whose Kyma installation and Runtime Agent connection
// take those durations.
package simulated

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/runtimeclient"
)

// Type is the backend type name in the provisioner set.
const Type = "simulated"

// FailureReason is the Status reason of a simulated creation failure.
const FailureReason = "simulated failure"

// Spec configures the simulation.
type Spec struct {
	DomainDelay         time.Duration
	CreationDuration    time.Duration
	UpdateDuration      time.Duration
	HibernationDuration time.Duration
	DeletionDuration    time.Duration
	// InstallationDuration and AgentConnectionDuration are how long the simulated runtime takes
	// to install Kyma and to connect its Runtime Agent (carried in its kubeconfig).
	InstallationDuration    time.Duration
	AgentConnectionDuration time.Duration
	// FailRuntimeNames: runtimes with these names fail to be created.
	FailRuntimeNames []string
	// FailureRate (0..1): the share of runtimes whose creation fails.
	FailureRate float64
}

// DefaultSpec is the simulation of an empty spec.
func DefaultSpec() Spec {
	return Spec{
		DomainDelay:         time.Second,
		CreationDuration:    3 * time.Second,
		UpdateDuration:      2 * time.Second,
		HibernationDuration: 2 * time.Second,
		DeletionDuration:    2 * time.Second,
		// A simulated runtime's own defaults (what its kubeconfig falls back to).
		InstallationDuration:    runtimeclient.DefaultSimulatedInstallDuration,
		AgentConnectionDuration: runtimeclient.DefaultSimulatedConnectionDuration,
	}
}

// jsonSpec is the spec as configured; durations stay raw so errors can name the field.
type jsonSpec struct {
	DomainDelay         json.RawMessage `json:"domainDelay"`
	CreationDuration    json.RawMessage `json:"creationDuration"`
	UpdateDuration      json.RawMessage `json:"updateDuration"`
	HibernationDuration json.RawMessage `json:"hibernationDuration"`
	DeletionDuration    json.RawMessage `json:"deletionDuration"`
	Installation        json.RawMessage `json:"installationDuration"`
	AgentConnection     json.RawMessage `json:"agentConnectionDuration"`
	FailRuntimeNames    []string        `json:"failRuntimeNames"`
	FailureRate         float64         `json:"failureRate"`
}

// ParseSpec decodes a provisioner set entry's spec; durations it leaves out are DefaultSpec's.
func ParseSpec(raw json.RawMessage) (Spec, error) {
	var js jsonSpec
	if err := infrastructure.DecodeSpec(raw, &js); err != nil {
		return Spec{}, err
	}
	spec := DefaultSpec()
	spec.FailRuntimeNames, spec.FailureRate = js.FailRuntimeNames, js.FailureRate
	for _, d := range []struct {
		field string
		raw   json.RawMessage
		dst   *time.Duration
	}{
		{"domainDelay", js.DomainDelay, &spec.DomainDelay},
		{"creationDuration", js.CreationDuration, &spec.CreationDuration},
		{"updateDuration", js.UpdateDuration, &spec.UpdateDuration},
		{"hibernationDuration", js.HibernationDuration, &spec.HibernationDuration},
		{"deletionDuration", js.DeletionDuration, &spec.DeletionDuration},
		{"installationDuration", js.Installation, &spec.InstallationDuration},
		{"agentConnectionDuration", js.AgentConnection, &spec.AgentConnectionDuration},
	} {
		if len(d.raw) == 0 || string(d.raw) == "null" {
			continue
		}
		v, err := parseDuration(d.raw)
		if err != nil {
			return Spec{}, fmt.Errorf("spec.%s: %w", d.field, err)
		}
		*d.dst = v
	}
	return spec, nil
}

// parseDuration reads a Go duration string or a number of seconds.
func parseDuration(b []byte) (time.Duration, error) {
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return v, nil
	}
	secs, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return 0, fmt.Errorf("invalid duration %s: want a string such as \"1.5s\" or a number of seconds", b)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// Backend simulates clusters. It is safe for concurrent use.
type Backend struct {
	domainDelay, creation, update, hibernation, deletion time.Duration
	installation, agentConnection                        time.Duration
	failNames                                            []string
	failureRate                                          float64
	now                                                  func() time.Time
}

var _ infrastructure.Backend = (*Backend)(nil)

// Option changes a Backend.
type Option func(*Backend)

// WithNow sets the clock (tests).
func WithNow(now func() time.Time) Option { return func(b *Backend) { b.now = now } }

// New builds a simulated backend.
func New(spec Spec, opts ...Option) (*Backend, error) {
	b := &Backend{
		domainDelay:  spec.DomainDelay,
		creation:     spec.CreationDuration,
		update:       spec.UpdateDuration,
		hibernation:  spec.HibernationDuration,
		deletion:     spec.DeletionDuration,
		installation: spec.InstallationDuration, agentConnection: spec.AgentConnectionDuration,
		failNames:   slices.Clone(spec.FailRuntimeNames),
		failureRate: spec.FailureRate,
		now:         time.Now,
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"domainDelay", b.domainDelay}, {"creationDuration", b.creation}, {"updateDuration", b.update},
		{"hibernationDuration", b.hibernation}, {"deletionDuration", b.deletion},
		{"installationDuration", b.installation}, {"agentConnectionDuration", b.agentConnection},
	} {
		if d.v < 0 {
			return nil, fmt.Errorf("spec.%s must not be negative", d.field)
		}
	}
	if math.IsNaN(b.failureRate) || b.failureRate < 0 || b.failureRate > 1 {
		return nil, fmt.Errorf("spec.failureRate must be between 0 and 1, not %v", spec.FailureRate)
	}
	for _, o := range opts {
		o(b)
	}
	return b, nil
}

// Factory builds the backend of a provisioner set entry.
func Factory(_ context.Context, e infrastructure.Entry, _ infrastructure.Deps) (infrastructure.Backend, error) {
	spec, err := ParseSpec(e.Spec)
	if err != nil {
		return nil, err
	}
	return New(spec)
}

// elapsed is the time since the request was made.
func (b *Backend) elapsed(spec infrastructure.Spec) (time.Duration, error) {
	if spec.RuntimeID == "" {
		return 0, errors.New("simulated backend: runtime ID is empty")
	}
	if spec.RequestedAt.IsZero() {
		return 0, fmt.Errorf("simulated backend: runtime %s: Spec.RequestedAt is not set (the simulator derives progress from it)", spec.RuntimeID)
	}
	return b.now().Sub(spec.RequestedAt), nil
}

// Create is a no-op: the cluster exists as soon as it is asked for.
func (b *Backend) Create(_ context.Context, spec infrastructure.Spec) error {
	if spec.RuntimeID == "" {
		return errors.New("simulated backend: runtime ID is empty")
	}
	return nil
}

// Status derives the cluster's state from the time since spec.RequestedAt:
//   - create: the domain after domainDelay; InProgress until creationDuration, then Succeeded or,
//     for a failing runtime, Failed with FailureReason;
//   - update: Succeeded, with the revision Update returned observed, after updateDuration;
//   - hibernate: Succeeded and Hibernated after hibernationDuration;
//   - delete: Succeeded (Deleted reports the progress).
func (b *Backend) Status(_ context.Context, spec infrastructure.Spec) (infrastructure.Status, error) {
	el, err := b.elapsed(spec)
	if err != nil {
		return infrastructure.Status{}, err
	}
	st := infrastructure.Status{Domain: Domain(spec), Phase: infrastructure.PhaseSucceeded}
	switch spec.Request {
	case infrastructure.RequestCreate, "":
		if el < b.domainDelay {
			st.Domain = ""
		}
		switch {
		case el < b.creation:
			st.Phase, st.DoneAt = infrastructure.PhaseInProgress, spec.RequestedAt.Add(b.creation)
		case b.fails(spec):
			st.Phase, st.Reason = infrastructure.PhaseFailed, FailureReason
		}
	case infrastructure.RequestUpdate:
		if el < b.update {
			st.Phase, st.DoneAt = infrastructure.PhaseInProgress, spec.RequestedAt.Add(b.update)
		} else {
			st.ObservedRevision = spec.RequestedAt.UnixMilli()
		}
	case infrastructure.RequestHibernate:
		if el < b.hibernation {
			st.Phase, st.DoneAt = infrastructure.PhaseInProgress, spec.RequestedAt.Add(b.hibernation)
		} else {
			st.Hibernated = true
		}
	case infrastructure.RequestDelete:
	default:
		return infrastructure.Status{}, fmt.Errorf("simulated backend: runtime %s: unknown request %q", spec.RuntimeID, spec.Request)
	}
	return st, nil
}

// fails reports whether the runtime's creation is to fail.
func (b *Backend) fails(spec infrastructure.Spec) bool {
	if slices.Contains(b.failNames, spec.Name) {
		return true
	}
	return b.failureRate > 0 && unitHash(spec.RuntimeID) < b.failureRate
}

// unitHash maps s to [0, 1) deterministically.
func unitHash(s string) float64 {
	sum := sha256.Sum256([]byte(s))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// Domain is the simulated cluster's domain: <name>.<runtimeID[:8]>.simulated.kyma.local.
func Domain(spec infrastructure.Spec) string {
	id := spec.RuntimeID
	if len(id) > 8 {
		id = id[:8]
	}
	name := spec.Name
	if name == "" {
		name = "runtime"
	}
	return name + "." + id + ".simulated.kyma.local"
}

// Kubeconfig returns the kubeconfig of the simulated runtime, with the spec's installation and
// agent connection durations.
func (b *Backend) Kubeconfig(_ context.Context, spec infrastructure.Spec) (string, error) {
	if spec.RuntimeID == "" {
		return "", errors.New("simulated backend: runtime ID is empty")
	}
	return runtimeclient.SimulatedKubeconfig(spec.RuntimeID, b.installation, b.agentConnection), nil
}

// Update returns spec.RequestedAt in Unix milliseconds as the revision Status reports once
// updateDuration has passed.
func (b *Backend) Update(_ context.Context, spec infrastructure.Spec) (int64, error) {
	if _, err := b.elapsed(spec); err != nil {
		return 0, err
	}
	return spec.RequestedAt.UnixMilli(), nil
}

// Hibernate is a no-op; Status (with Request hibernate) reports Hibernated after
// hibernationDuration.
func (b *Backend) Hibernate(_ context.Context, spec infrastructure.Spec) error {
	if spec.RuntimeID == "" {
		return errors.New("simulated backend: runtime ID is empty")
	}
	return nil
}

// Delete is a no-op; Deleted reports true after deletionDuration.
func (b *Backend) Delete(_ context.Context, spec infrastructure.Spec) error {
	if spec.RuntimeID == "" {
		return errors.New("simulated backend: runtime ID is empty")
	}
	return nil
}

// Deleted is true once deletionDuration has passed since spec.RequestedAt.
func (b *Backend) Deleted(_ context.Context, spec infrastructure.Spec) (bool, error) {
	el, err := b.elapsed(spec)
	if err != nil {
		return false, err
	}
	return el >= b.deletion, nil
}
