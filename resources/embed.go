// Package resources ships files that the broker embeds in its binary.
package resources

import (
	_ "embed"
	"slices"
)

//go:embed plans.yaml
var plansYAML []byte

//go:embed overrides.yaml
var overridesYAML []byte

// Overrides returns the default overrides file (entries Kyma components get at provisioning).
func Overrides() []byte {
	return slices.Clone(overridesYAML)
}

// Plans returns the default plans file (service, plans, regions, machine
// types and defaults of the OSB catalog). Every call returns a fresh copy, so
// callers may modify it freely.
func Plans() []byte {
	return slices.Clone(plansYAML)
}
