// Package deprovisioning holds the steps of the broker's deprovisioning process (seed 001,
// ordered by weight), one file per step.
package deprovisioning

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/process/systems"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Op is a deprovisioning operation as its steps see it.
type Op = engine.Operation[instance.DeprovisioningData]

// Deps are what the deprovisioning steps use.
type Deps struct {
	Instances    storage.Instances
	Operations   storage.Operations
	Provisioner  client.Client
	PollInterval time.Duration
	// Systems are the external systems; nil ones are disabled and their steps skipped.
	Systems systems.Systems
}
