// Package director is the Runtime Provisioner's view of the Compass Director: runtime
// registration, labels, and one-time tokens for the Runtime Agent.
package compass

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"

	"github.com/google/uuid"
)

// Status conditions of a runtime in the Director.
const (
	ConditionInitial      = "INITIAL"
	ConditionProvisioning = "PROVISIONING"
	ConditionConnected    = "CONNECTED"
	ConditionFailed       = "FAILED"
)

// ConsoleURLLabel is the runtime label with the runtime's console URL; the broker shows it as the
// instance's dashboard URL.
const ConsoleURLLabel = "runtime_consoleUrl"

// The Director accepts only label keys of letters, digits and underscores (at most 256), on
// registration, update and setRuntimeLabel alike, and refuses to have the scenarios label set:
// Compass manages it from formations. Facts in internal/clients/director/directorschema.
var labelKeyPattern = regexp.MustCompile(`^[a-zA-Z0-9_]*$`)

const maxLabelKeyLength = 256

// ScenariosLabel is the label the Director manages itself and refuses to have set.
const ScenariosLabel = "scenarios"

// ValidLabelKey tells whether the Director accepts key as a label key that a client may set.
func ValidLabelKey(key string) bool {
	return key != "" && len(key) <= maxLabelKeyLength && labelKeyPattern.MatchString(key) && key != ScenariosLabel
}

// DirectorLabels are the labels of in the Director accepts: the provisioner's own labels on a
// runtime (its idempotency key and backend, keys with '/', '.' and '-') stay with the provisioner.
func DirectorLabels(in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		if ValidLabelKey(k) {
			out[k] = v
		}
	}
	return out
}

// Token is a one-time token with the Connector URL it is valid for.
type Token struct {
	Token        string
	ConnectorURL string
}

// Client is the Director API the provisioner uses. Every call is scoped by tenant.
type Client interface {
	// RegisterRuntime registers the runtime with the status condition (one of the Condition*
	// constants; empty for the Director's default) and returns its Compass ID. runtimeID is the
	// provisioner's ID, used as an idempotency key; a runtime registered before gets the condition.
	RegisterRuntime(ctx context.Context, tenant, runtimeID, name, condition string, labels map[string]any) (string, error)
	UpdateRuntimeLabels(ctx context.Context, tenant, compassID string, labels map[string]string) error
	// RequestOneTimeToken returns a new one-time token for the runtime's agent and revokes every
	// earlier one, so that repeating it leaves one valid token.
	RequestOneTimeToken(ctx context.Context, tenant, compassID string) (Token, error)
	// UnregisterRuntime unregisters the runtime; a runtime that is not registered counts as done.
	UnregisterRuntime(ctx context.Context, tenant, compassID string) error
	// SetRuntimeStatusCondition sets the runtime's status condition (one of the Condition* constants).
	SetRuntimeStatusCondition(ctx context.Context, tenant, compassID, condition string) error
}

// ConditionReader reads a runtime's status condition in the Director, which the Runtime Agent
// sets (CONNECTED once synchronised, FAILED when it cannot reach Compass or its certificate is
// refused): the provisioner's runtimeConnectionStatus follows it. Optional: a Client that does
// not implement it (Local) leaves the status to the provisioner's operations.
type ConditionReader interface {
	// RuntimeStatusCondition returns the runtime's condition (one of the Condition* constants).
	RuntimeStatusCondition(ctx context.Context, tenant, compassID string) (string, error)
}

// Local stands in for the Director in the embedded default. It keeps no state, so it survives
// restarts: the Compass ID is derived from the runtime ID and tokens are random.
type Local struct {
	ConnectorURL string
}

var _ Client = Local{}

func (l Local) RegisterRuntime(_ context.Context, tenant, runtimeID, _, _ string, _ map[string]any) (string, error) {
	if tenant == "" || runtimeID == "" {
		return "", fmt.Errorf("registering runtime: tenant and runtime ID are required")
	}
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(tenant+"/"+runtimeID)).String(), nil
}

func (Local) UpdateRuntimeLabels(context.Context, string, string, map[string]string) error {
	return nil
}

func (l Local) RequestOneTimeToken(_ context.Context, _, compassID string) (Token, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return Token{}, fmt.Errorf("requesting one-time token for %s: %w", compassID, err)
	}
	return Token{Token: hex.EncodeToString(b), ConnectorURL: l.ConnectorURL}, nil
}

func (Local) UnregisterRuntime(context.Context, string, string) error { return nil }

func (Local) SetRuntimeStatusCondition(context.Context, string, string, string) error { return nil }
