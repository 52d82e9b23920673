// Package operations defines the Runtime Provisioner's operations as step-engine processes:
// provision, deprovision, upgradeRuntime, upgradeShoot, hibernate and reconnect, with the
// Compass provisioner's stage names and per-stage time limits. One file per step.
package operations

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Operation types in the engine.
const (
	TypeProvision      = "provisioner_provision"
	TypeDeprovision    = "provisioner_deprovision"
	TypeUpgradeRuntime = "provisioner_upgrade_runtime"
	TypeUpgradeShoot   = "provisioner_upgrade_shoot"
	TypeHibernate      = "provisioner_hibernate"
	TypeReconnect      = "provisioner_reconnect"
)

// IsType reports whether t is one of the provisioner's operation types.
func IsType(t string) bool {
	switch t {
	case TypeProvision, TypeDeprovision, TypeUpgradeRuntime, TypeUpgradeShoot, TypeHibernate, TypeReconnect:
		return true
	}
	return false
}

// Request kinds whose first time is remembered in Data.RequestedAt; the backend ones are
// also the infrastructure.Request they make.
const (
	requestCreate    = string(infrastructure.RequestCreate)
	requestDelete    = string(infrastructure.RequestDelete)
	requestUpdate    = string(infrastructure.RequestUpdate)
	requestHibernate = string(infrastructure.RequestHibernate)
	requestInstall   = "install"
	requestAgent     = "agent"
)

// Kyma is the requested Kyma installation; secret configuration values are kept in the
// runtime's encrypted secrets, never here.
type Kyma struct {
	Version       string        `json:"version"`
	Profile       string        `json:"profile,omitempty"`
	Components    []Component   `json:"components"`
	Configuration []ConfigEntry `json:"configuration,omitempty"`
}

// Component is one Kyma component (installed as a module).
type Component struct {
	Name          string        `json:"name"`
	Namespace     string        `json:"namespace"`
	SourceURL     string        `json:"sourceURL,omitempty"`
	Configuration []ConfigEntry `json:"configuration,omitempty"`
}

// ConfigEntry is a configuration value; for a secret one Value is empty and the value is in
// the runtime's secrets under SecretKey.
type ConfigEntry struct {
	Key       string `json:"key"`
	Value     string `json:"value,omitempty"`
	Secret    bool   `json:"secret,omitempty"`
	SecretKey string `json:"secretKey,omitempty"`
}

// RuntimeConfig is what a runtime was asked to be (storage.Runtime.Config).
type RuntimeConfig struct {
	Description  string                       `json:"description,omitempty"`
	Labels       map[string]any               `json:"labels,omitempty"`
	SubAccountID string                       `json:"subAccountID,omitempty"`
	Cluster      infrastructure.ClusterConfig `json:"cluster"`
	// Gardener is the cluster configuration exactly as requested (GardenerConfigInput JSON),
	// so the API can return every field; Cluster is derived from it.
	Gardener       json.RawMessage `json:"gardener,omitempty"`
	Administrators []string        `json:"administrators,omitempty"`
	Kyma           *Kyma           `json:"kyma,omitempty"`
}

// DecodeRuntimeConfig reads a runtime's configuration.
func DecodeRuntimeConfig(rt storage.Runtime) (RuntimeConfig, error) {
	var c RuntimeConfig
	if len(rt.Config) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(rt.Config, &c); err != nil {
		return c, fmt.Errorf("decoding configuration of runtime %s: %w", rt.ID, err)
	}
	return c, nil
}

// Data is the payload of every provisioner operation.
type Data struct {
	RuntimeID string `json:"runtimeID"`
	Tenant    string `json:"tenant"`
	Backend   string `json:"backend"`
	// Config is the configuration this operation works towards (for upgrades: the new one).
	Config           RuntimeConfig `json:"config"`
	CompassRuntimeID string        `json:"compassRuntimeID,omitempty"`
	ClusterDomain    string        `json:"clusterDomain,omitempty"`
	// RequestedAt: when each kind of request was first made to the backend or the runtime.
	RequestedAt    map[string]time.Time `json:"requestedAt,omitempty"`
	TargetRevision int64                `json:"targetRevision,omitempty"`
	// Allocated: the backend allocated the runtime on a shared host (it reported an
	// allocation), so the runtime is a namespace there, not a cluster of its own.
	Allocated bool `json:"allocated,omitempty"`
	// Namespace is an allocated runtime's own namespace on its host, if it has one (the
	// kubernetes backend's): its kubeconfig is confined to it and it is its Kyma namespace.
	Namespace string `json:"namespace,omitempty"`
}
