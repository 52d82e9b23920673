package module

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Validation shared by every command (and by template generation): each function says what is
// wrong with one value, the way the tool that would reject it later says it. The facts and their
// sources are in testdata/external-facts.json.

const (
	// ComponentNameMaxLength and componentNamePattern: OCM's component descriptor v2 schema.
	ComponentNameMaxLength = 255
	// TemplateModuleNameMaxLength, TemplateVersionMaxLength, ChannelMaxLength: lifecycle-manager's
	// ModuleTemplate CRD.
	TemplateModuleNameMaxLength = 64
	TemplateVersionMaxLength    = 32
	ChannelMaxLength            = 32
	// ocmBuildSeparator replaces "+" of a version in OCI tags, as OCM does.
	ocmBuildSeparator = ".build-"
)

var (
	componentNamePattern  = regexp.MustCompile(`^[a-z][-a-z0-9]*([.][a-z][-a-z0-9]*)*[.][a-z]{2,}(/[a-z][-a-z0-9_]*([.][a-z][-a-z0-9_]*)*)+$`)
	templateModuleName    = regexp.MustCompile(`^([a-z]{3,}(-[a-z]{3,})*)?$`)
	templateVersion       = regexp.MustCompile(`^((0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[a-zA-Z-][0-9a-zA-Z-]*)?)?$`)
	templateChannel       = regexp.MustCompile(`^[a-z]{3,}$`)
	strictSemver          = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	customStateCheckState = map[string]bool{"Ready": true, "Processing": true, "Error": true, "Deleting": true, "Warning": true}
)

// ErrInvalid marks every validation error, for errors.Is.
var ErrInvalid = errors.New("invalid")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ValidateComponentName checks an OCM component name (v2 schema: pattern, at most 255 characters).
func ValidateComponentName(name string) error {
	if len(name) > ComponentNameMaxLength {
		return invalid("component name %q: %d characters, at most %d", name, len(name), ComponentNameMaxLength)
	}
	if !componentNamePattern.MatchString(name) {
		return invalid("component name %q: want a lower-case DNS domain and a path, like kyma-project.io/module/sample", name)
	}
	return nil
}

// ValidateVersion checks a module version: a semantic version (an optional leading v, as the
// Kyma CLI allows), build metadata included; OCM stores it under VersionTag.
func ValidateVersion(v string) error {
	if !strictSemver.MatchString(v) {
		return invalid("version %q is not a semantic version (like 1.2.3, 1.2.3-rc1 or 1.2.3+build.5)", v)
	}
	return nil
}

// VersionTag is the OCI tag of a component version: OCM writes build metadata's "+" (not
// allowed in tags) as ".build-".
func VersionTag(version string) string {
	return strings.ReplaceAll(version, "+", ocmBuildSeparator)
}

// TagVersion reverses VersionTag (the last ".build-" is the "+").
func TagVersion(tag string) string {
	i := strings.LastIndex(tag, ocmBuildSeparator)
	if i < 0 {
		return tag
	}
	return tag[:i] + "+" + tag[i+len(ocmBuildSeparator):]
}

// ValidateTemplateModuleName checks a ModuleTemplate's spec.moduleName as lifecycle-manager's CRD
// does: words of at least three lower-case letters joined by dashes, at most 64 characters.
func ValidateTemplateModuleName(name string) error {
	if name == "" || len(name) > TemplateModuleNameMaxLength || !templateModuleName.MatchString(name) {
		return invalid("module name %q: lifecycle-manager takes words of 3 or more lower-case letters joined by dashes, at most %d characters (like sample or btp-operator)", name, TemplateModuleNameMaxLength)
	}
	return nil
}

// ValidateTemplateVersion checks a ModuleTemplate's spec.version as lifecycle-manager's CRD does:
// MAJOR.MINOR.PATCH with an optional pre-release of one identifier that starts with a letter or
// dash; no leading v, no dots in the pre-release, no build metadata; at most 32 characters.
func ValidateTemplateVersion(v string) error {
	if v == "" || len(v) > TemplateVersionMaxLength || !templateVersion.MatchString(v) {
		return invalid("version %q: lifecycle-manager takes MAJOR.MINOR.PATCH[-PRERELEASE] without a leading v, a pre-release of letters, digits and dashes starting with a letter (1.0.0-rc1, not 1.0.0-rc.1), no build metadata, at most %d characters", v, TemplateVersionMaxLength)
	}
	return nil
}

// ValidateChannel checks a channel as lifecycle-manager's CRDs do: 3 to 32 lower-case letters.
func ValidateChannel(ch string) error {
	if len(ch) > ChannelMaxLength || !templateChannel.MatchString(ch) {
		return invalid("channel %q: 3 to %d lower-case letters", ch, ChannelMaxLength)
	}
	return nil
}

// ValidateNamespace checks a namespace name (a DNS-1123 label, as Kubernetes requires).
func ValidateNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return invalid("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}

// ValidateLabels checks Kubernetes label keys and values.
func ValidateLabels(labels map[string]string) error {
	for k, v := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return invalid("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return invalid("label %q value %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	return nil
}

// ValidateAnnotationKeys checks Kubernetes annotation keys.
func ValidateAnnotationKeys(annotations map[string]string) error {
	for k := range annotations {
		if errs := validation.IsQualifiedName(strings.ToLower(k)); len(errs) > 0 {
			return invalid("annotation key %q: %s", k, strings.Join(errs, "; "))
		}
	}
	return nil
}

// CustomStateCheck maps a value at a JSON path of the module's custom resource to a module
// state (lifecycle-manager's customStateCheck).
type CustomStateCheck struct {
	JSONPath    string `json:"jsonPath"`
	Value       string `json:"value"`
	MappedState string `json:"mappedState"`
}

// ValidateCustomStateChecks checks them as the Kyma CLI does: every field set, states of Kyma,
// and both Ready and Error mapped.
func ValidateCustomStateChecks(checks []CustomStateCheck) error {
	if len(checks) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for i, c := range checks {
		if c.JSONPath == "" || c.Value == "" || c.MappedState == "" {
			return invalid("customStateCheck[%d]: jsonPath, value and mappedState are required", i)
		}
		if !customStateCheckState[c.MappedState] {
			return invalid("customStateCheck[%d]: mappedState %q is not a Kyma state (Ready, Processing, Error, Deleting, Warning)", i, c.MappedState)
		}
		seen[c.MappedState] = true
	}
	if !seen["Ready"] || !seen["Error"] {
		return invalid("customStateCheck must map both Ready and Error")
	}
	return nil
}

// ValidateModuleTemplate checks what a ModuleTemplate made of a module would carry, before
// anything is written: the module name, version and channel as lifecycle-manager validates them.
func ValidateModuleTemplate(moduleName, version, channel string) error {
	if err := ValidateTemplateModuleName(moduleName); err != nil {
		return err
	}
	if err := ValidateTemplateVersion(version); err != nil {
		return err
	}
	return ValidateChannel(channel)
}
