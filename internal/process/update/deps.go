// Package update holds the steps of the broker's update process, one file per step.
package update

import (
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/engine"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Op is an update operation as its steps see it.
type Op = engine.Operation[instance.UpdateData]

// Deps are what the update steps use.
type Deps struct {
	Instances    storage.Instances
	Provisioner  client.Client
	PollInterval time.Duration
	// Operations and DefaultComponents let Update_Kyma_Modules rebuild the runtime's Kyma
	// configuration with changed modules.
	Operations        storage.Operations
	DefaultComponents []string
}
