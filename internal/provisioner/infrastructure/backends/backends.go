// Package backends wires the backend types (gardener, kubernetes, static, simulated) into the
// provisioner set. It exists apart from package infrastructure because every backend imports
// infrastructure for its types.
package backends

import (
	"context"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/kubernetes"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/simulated"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/static"
)

// Types returns a new registry of every backend type.
func Types() infrastructure.Types {
	return infrastructure.Types{
		gardener.Type:   gardener.Factory,
		kubernetes.Type: kubernetes.Factory,
		static.Type:     static.Factory,
		simulated.Type:  simulated.Factory,
	}
}

// NewSet builds the provisioner set that cfg describes with every backend type.
func NewSet(ctx context.Context, cfg infrastructure.Config, deps infrastructure.Deps) (*infrastructure.Set, error) {
	return infrastructure.NewSet(ctx, cfg, deps, Types())
}
