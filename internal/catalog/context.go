package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode"
)

// Platforms as they name themselves in the OSB context.
const (
	PlatformCloudFoundry = "cloudfoundry"
	PlatformKubernetes   = "kubernetes"
	PlatformSAP          = "sapcp"
)

// Context is the OSB context of a provision or update request, as the BTP/SAP
// (Service Manager, ERS), Cloud Foundry and Kubernetes platforms send it.
// Unknown fields are ignored; Raw keeps what was sent.
type Context struct {
	Platform string `json:"platform,omitempty"`

	// BTP / SAP.
	GlobalAccount         string                 `json:"globalaccount_id,omitempty"`
	SubAccount            string                 `json:"subaccount_id,omitempty"`
	TenantID              string                 `json:"tenant_id,omitempty"`
	UserID                string                 `json:"user_id,omitempty"`
	Region                string                 `json:"region,omitempty"`
	LicenseType           string                 `json:"license_type,omitempty"`
	CommercialModel       string                 `json:"commercial_model,omitempty"`
	Active                *bool                  `json:"active,omitempty"`
	SMOperatorCredentials *SMOperatorCredentials `json:"sm_operator_credentials,omitempty"`

	// Cloud Foundry.
	OrganizationGUID        string            `json:"organization_guid,omitempty"`
	OrganizationName        string            `json:"organization_name,omitempty"`
	SpaceGUID               string            `json:"space_guid,omitempty"`
	SpaceName               string            `json:"space_name,omitempty"`
	OrganizationAnnotations map[string]string `json:"organization_annotations,omitempty"`
	SpaceAnnotations        map[string]string `json:"space_annotations,omitempty"`
	InstanceAnnotations     map[string]string `json:"instance_annotations,omitempty"`

	// Cloud Foundry, Kubernetes and SAP.
	InstanceName string `json:"instance_name,omitempty"`

	// Kubernetes.
	Namespace string `json:"namespace,omitempty"`
	ClusterID string `json:"clusterid,omitempty"`

	// Raw is the context as received (nil when there was none).
	Raw json.RawMessage `json:"-"`
}

// SMOperatorCredentials are the Service Manager credentials BTP passes to
// the runtime (secret: store encrypted, never log).
type SMOperatorCredentials struct {
	ClientID     string `json:"clientid"`
	ClientSecret string `json:"clientsecret"`
	SMURL        string `json:"sm_url"`
	URL          string `json:"url"`
	XSAppName    string `json:"xsappname"`
}

// GlobalAccountID is globalaccount_id, else Cloud Foundry's organization_guid,
// else Kubernetes' clusterid.
func (c Context) GlobalAccountID() string {
	switch {
	case c.GlobalAccount != "":
		return c.GlobalAccount
	case c.OrganizationGUID != "":
		return c.OrganizationGUID
	}
	return c.ClusterID
}

// SubAccountID is subaccount_id, else Cloud Foundry's space_guid, else
// Kubernetes' namespace.
func (c Context) SubAccountID() string {
	switch {
	case c.SubAccount != "":
		return c.SubAccount
	case c.SpaceGUID != "":
		return c.SpaceGUID
	}
	return c.Namespace
}

// Validate requires a global account and a subaccount from any platform.
func (c Context) Validate() error {
	if c.GlobalAccountID() == "" {
		return fieldErr("context.globalaccount_id", "is required (Cloud Foundry: organization_guid, Kubernetes: clusterid)")
	}
	if c.SubAccountID() == "" {
		return fieldErr("context.subaccount_id", "is required (Cloud Foundry: space_guid, Kubernetes: namespace)")
	}
	return nil
}

// DecodeContext parses an OSB context without requiring any field (update
// requests may carry a partial one). Absent or null means an empty Context.
func DecodeContext(raw json.RawMessage) (Context, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return Context{}, nil
	}
	if trimmed[0] != '{' {
		return Context{}, fieldErr("context", "must be a JSON object")
	}
	var c Context
	if err := json.Unmarshal(trimmed, &c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Context{}, jsonFieldError("context", err)
		}
		return Context{}, fieldErr("context", "must be a valid JSON object: "+err.Error())
	}
	if err := c.checkText(); err != nil {
		return Context{}, err
	}
	c.Raw = slices.Clone(json.RawMessage(trimmed))
	return c, nil
}

// Bounds of the context's strings: IDs end up in HTTP headers, URLs, names and labels of the
// external systems, names only in labels and descriptions.
const (
	maxContextID   = 256
	maxContextName = 1024
)

// checkText refuses context strings that no later step could use: control characters (a NUL or a
// newline in a tenant ID cannot go into a header, and a request that cannot be built never
// succeeds) and lengths beyond the bounds.
func (c Context) checkText() error {
	for _, f := range []struct {
		field, value string
		max          int
	}{
		{"platform", c.Platform, maxContextID}, {"globalaccount_id", c.GlobalAccount, maxContextID},
		{"subaccount_id", c.SubAccount, maxContextID}, {"tenant_id", c.TenantID, maxContextID},
		{"user_id", c.UserID, maxContextID}, {"region", c.Region, maxContextID},
		{"license_type", c.LicenseType, maxContextID}, {"commercial_model", c.CommercialModel, maxContextID},
		{"organization_guid", c.OrganizationGUID, maxContextID}, {"space_guid", c.SpaceGUID, maxContextID},
		{"namespace", c.Namespace, maxContextID}, {"clusterid", c.ClusterID, maxContextID},
		{"organization_name", c.OrganizationName, maxContextName}, {"space_name", c.SpaceName, maxContextName},
		{"instance_name", c.InstanceName, maxContextName},
	} {
		if err := checkPrintable("context."+f.field, f.value, f.max); err != nil {
			return err
		}
	}
	return nil
}

func checkPrintable(field, value string, max int) error {
	if len(value) > max {
		return fieldErr(field, fmt.Sprintf("must be at most %d characters, got %d", max, len(value)))
	}
	for i, r := range value {
		if !unicode.IsPrint(r) {
			return fieldErr(field, fmt.Sprintf("must be printable text, got %q at position %d", r, i))
		}
	}
	return nil
}

// ParseContext parses the context of a provision request: DecodeContext, then
// Validate (a global account and a subaccount are required).
func ParseContext(raw json.RawMessage) (Context, error) {
	c, err := DecodeContext(raw)
	if err != nil {
		return Context{}, err
	}
	if err := c.Validate(); err != nil {
		return Context{}, err
	}
	return c, nil
}
