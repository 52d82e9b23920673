package module

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type pattern struct {
	Pattern   string `json:"pattern"`
	MaxLength int    `json:"maxLength"`
}

// The code agrees with the external facts it relies on (testdata/external-facts.json).
func TestExternalFacts(t *testing.T) {
	raw, err := os.ReadFile("testdata/external-facts.json")
	require.NoError(t, err)
	var f struct {
		OCM struct {
			ComponentName struct {
				Pattern   string `json:"pattern"`
				MaxLength int    `json:"maxLength"`
			} `json:"componentName"`
			VersionTag struct {
				BuildSeparator string `json:"buildSeparator"`
			} `json:"versionTag"`
		} `json:"ocm"`
		LifecycleManager struct {
			CRD struct {
				ModuleName pattern `json:"spec.moduleName"`
				Version    pattern `json:"spec.version"`
				Channel    pattern `json:"spec.channel"`
			} `json:"moduleTemplateCRD"`
			Labels map[string]string `json:"labels"`
		} `json:"lifecycleManager"`
		KymaCLI struct {
			Signing struct {
				SignatureName string `json:"signatureName"`
				Issuer        string `json:"issuer"`
			} `json:"signing"`
			RegistryCredSelector struct {
				Label string `json:"label"`
			} `json:"registryCredSelector"`
		} `json:"kymaCLI"`
	}
	require.NoError(t, json.Unmarshal(raw, &f))
	assert.Equal(t, f.OCM.ComponentName.Pattern, componentNamePattern.String())
	assert.Equal(t, f.OCM.ComponentName.MaxLength, ComponentNameMaxLength)
	assert.Equal(t, f.OCM.VersionTag.BuildSeparator, ocmBuildSeparator)
	assert.Equal(t, f.LifecycleManager.CRD.ModuleName.Pattern, templateModuleName.String())
	assert.Equal(t, f.LifecycleManager.CRD.ModuleName.MaxLength, TemplateModuleNameMaxLength)
	assert.Equal(t, f.LifecycleManager.CRD.Version.Pattern, templateVersion.String())
	assert.Equal(t, f.LifecycleManager.CRD.Version.MaxLength, TemplateVersionMaxLength)
	assert.Equal(t, "^$|"+templateChannel.String(), f.LifecycleManager.CRD.Channel.Pattern, "an empty channel is the default one; a module names its channel")
	assert.Equal(t, f.LifecycleManager.CRD.Channel.MaxLength, ChannelMaxLength)
	assert.Equal(t, f.LifecycleManager.Labels["internal"], LabelInternal)
	assert.Equal(t, f.LifecycleManager.Labels["beta"], LabelBeta)
	assert.Equal(t, f.KymaCLI.Signing.SignatureName, DefaultSignatureName)
	assert.Equal(t, f.KymaCLI.Signing.Issuer, SignatureIssuer)
	assert.Equal(t, f.KymaCLI.RegistryCredSelector.Label, LabelRegistryCred)
}
