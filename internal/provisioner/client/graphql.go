package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// TenantHeader is the HTTP header that carries the tenant of a GraphQL call.
const TenantHeader = "tenant"

// Extension keys of the API's GraphQL errors (see internal/provisioner/api).
const (
	extensionCode   = "code"
	extensionReason = "reason"
	extensionField  = "field"
)

const (
	defaultHTTPTimeout = 30 * time.Second
	// maxResponseBytes bounds what is read of a response; a runtime status with its
	// kubeconfig is a few kilobytes.
	maxResponseBytes = 16 << 20
)

// Selections of the output types: every field, so that the GraphQL client returns what the
// in-process one does. (A document must use each fragment it defines.) Azure's zones are
// aliased (gqlschema.AzureZoneNamesAlias): they are nullable, GCP's and OpenStack's are not,
// and GraphQL refuses one response name with two shapes.
const (
	operationStatusFragment = `
fragment OperationStatusFields on OperationStatus {
  id operation state message runtimeID compassRuntimeID
  lastError { errMessage reason component }
}
`
	runtimeConfigFragments = `
fragment ConfigEntryFields on ConfigEntry { key value secret }
fragment RuntimeConfigFields on RuntimeConfig {
  clusterConfig {
    name kubernetesVersion provider targetSecret region machineType machineImage machineImageVersion
    diskType volumeSizeGB workerCidr autoScalerMin autoScalerMax maxSurge maxUnavailable purpose
    licenceType enableKubernetesVersionAutoUpdate enableMachineImageVersionAutoUpdate seed
    exposureClassName euAccess podsCidr servicesCidr shootNetworkingFilterDisabled
    controlPlaneFailureTolerance shootAndSeedSameRegion
    providerSpecificConfig {
      __typename
      ... on GCPProviderConfig { zones }
      ... on AzureProviderConfig {
        vnetCidr zoneNames: zones azureZones { name cidr } enableNatGateway idleConnectionTimeoutMinutes
      }
      ... on AWSProviderConfig { vpcCidr awsZones { name workerCidr publicCidr internalCidr } enableIMDSv2 }
      ... on OpenStackProviderConfig {
        zones floatingPoolName cloudProfileName loadBalancerProvider
      }
    }
    dnsConfig { domain providers { domainsInclude primary secretName type } }
    oidcConfig { clientID issuerURL groupsClaim signingAlgs usernameClaim usernamePrefix }
  }
  kymaConfig {
    version profile
    components { component namespace sourceURL configuration { ...ConfigEntryFields } }
    configuration { ...ConfigEntryFields }
  }
  kubeconfig
  allocation { host audienceURL cpu memoryGB storageBytes dataDir slots namespace }
}
`
	runtimeStatusFragments = operationStatusFragment + runtimeConfigFragments + `
fragment RuntimeStatusFields on RuntimeStatus {
  lastOperationStatus { ...OperationStatusFields }
  runtimeConnectionStatus { status errors { message } }
  runtimeConfiguration { ...RuntimeConfigFields }
}
`
)

const (
	provisionRuntimeMutation = `mutation ($config: ProvisionRuntimeInput!) {
  result: provisionRuntime(config: $config) { ...OperationStatusFields }
}` + operationStatusFragment
	upgradeRuntimeMutation = `mutation ($id: String!, $config: UpgradeRuntimeInput!) {
  result: upgradeRuntime(id: $id, config: $config) { ...OperationStatusFields }
}` + operationStatusFragment
	upgradeShootMutation = `mutation ($id: String!, $config: UpgradeShootInput!) {
  result: upgradeShoot(id: $id, config: $config) { ...OperationStatusFields }
}` + operationStatusFragment
	hibernateRuntimeMutation = `mutation ($id: String!) {
  result: hibernateRuntime(id: $id) { ...OperationStatusFields }
}` + operationStatusFragment
	deprovisionRuntimeMutation = `mutation ($id: String!) {
  result: deprovisionRuntime(id: $id)
}`
	reconnectRuntimeAgentMutation = `mutation ($id: String!) {
  result: reconnectRuntimeAgent(id: $id)
}`
	createRuntimeCredentialsMutation = `mutation ($id: String!, $name: String!, $expirationSeconds: Int!) {
  result: createRuntimeCredentials(id: $id, name: $name, expirationSeconds: $expirationSeconds) { kubeconfig expiresAt }
}`
	revokeRuntimeCredentialsMutation = `mutation ($id: String!, $name: String!) {
  result: revokeRuntimeCredentials(id: $id, name: $name)
}`
	runtimeStatusQuery = `query ($id: String!) {
  result: runtimeStatus(id: $id) { ...RuntimeStatusFields }
}` + runtimeStatusFragments
	runtimeConfigurationQuery = `query ($id: String!) {
  result: runtimeStatus(id: $id) { runtimeConfiguration { ...RuntimeConfigFields } }
}` + runtimeConfigFragments
	runtimeOperationStatusQuery = `query ($id: String!) {
  result: runtimeOperationStatus(id: $id) { ...OperationStatusFields }
}` + operationStatusFragment
)

// graphQLClient calls the provisioner's GraphQL API over HTTP.
type graphQLClient struct {
	endpoint   string
	httpClient *http.Client
}

// NewGraphQL returns a Client that calls the provisioner's GraphQL API at endpoint (for
// example "http://provisioner:3000/graphql"). httpClient may be nil: a client with a 30s
// timeout is used. Errors the API reports are returned as *apperr.Error with the code, field
// and reason of the API's error; transport errors are wrapped with what was being done.
func NewGraphQL(endpoint string, httpClient *http.Client) Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: defaultHTTPTimeout}
	}
	return &graphQLClient{endpoint: endpoint, httpClient: httpClient}
}

func (c *graphQLClient) ProvisionRuntime(ctx context.Context, tenant string, config gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	var result *gqlschema.OperationStatus
	err := c.do(ctx, "provisioning a runtime", tenant, provisionRuntimeMutation, map[string]any{"config": config}, &result)
	return result, err
}

func (c *graphQLClient) DeprovisionRuntime(ctx context.Context, tenant, runtimeID string) (string, error) {
	var result string
	err := c.do(ctx, fmt.Sprintf("deprovisioning runtime %s", runtimeID), tenant, deprovisionRuntimeMutation, map[string]any{"id": runtimeID}, &result)
	return result, err
}

func (c *graphQLClient) UpgradeRuntime(ctx context.Context, tenant, runtimeID string, config gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
	var result *gqlschema.OperationStatus
	err := c.do(ctx, fmt.Sprintf("upgrading runtime %s", runtimeID), tenant, upgradeRuntimeMutation, map[string]any{"id": runtimeID, "config": config}, &result)
	return result, err
}

func (c *graphQLClient) UpgradeShoot(ctx context.Context, tenant, runtimeID string, config gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	var result *gqlschema.OperationStatus
	err := c.do(ctx, fmt.Sprintf("upgrading the shoot of runtime %s", runtimeID), tenant, upgradeShootMutation, map[string]any{"id": runtimeID, "config": config}, &result)
	return result, err
}

func (c *graphQLClient) HibernateRuntime(ctx context.Context, tenant, runtimeID string) (*gqlschema.OperationStatus, error) {
	var result *gqlschema.OperationStatus
	err := c.do(ctx, fmt.Sprintf("hibernating runtime %s", runtimeID), tenant, hibernateRuntimeMutation, map[string]any{"id": runtimeID}, &result)
	return result, err
}

func (c *graphQLClient) ReconnectRuntimeAgent(ctx context.Context, tenant, runtimeID string) (string, error) {
	var result string
	err := c.do(ctx, fmt.Sprintf("reconnecting the agent of runtime %s", runtimeID), tenant, reconnectRuntimeAgentMutation, map[string]any{"id": runtimeID}, &result)
	return result, err
}

func (c *graphQLClient) CreateRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error) {
	var result *gqlschema.RuntimeCredentials
	err := c.do(ctx, fmt.Sprintf("creating credentials %s of runtime %s", name, runtimeID), tenant, createRuntimeCredentialsMutation,
		map[string]any{"id": runtimeID, "name": name, "expirationSeconds": expirationSeconds}, &result)
	return result, err
}

func (c *graphQLClient) RevokeRuntimeCredentials(ctx context.Context, tenant, runtimeID, name string) (string, error) {
	var result string
	err := c.do(ctx, fmt.Sprintf("revoking credentials %s of runtime %s", name, runtimeID), tenant, revokeRuntimeCredentialsMutation,
		map[string]any{"id": runtimeID, "name": name}, &result)
	return result, err
}

func (c *graphQLClient) RuntimeStatus(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeStatus, error) {
	var result *gqlschema.RuntimeStatus
	err := c.do(ctx, fmt.Sprintf("getting the status of runtime %s", runtimeID), tenant, runtimeStatusQuery, map[string]any{"id": runtimeID}, &result)
	return result, err
}

func (c *graphQLClient) RuntimeConfiguration(ctx context.Context, tenant, runtimeID string) (*gqlschema.RuntimeConfig, error) {
	var result *struct {
		RuntimeConfiguration *gqlschema.RuntimeConfig `json:"runtimeConfiguration"`
	}
	err := c.do(ctx, fmt.Sprintf("getting the configuration of runtime %s", runtimeID), tenant, runtimeConfigurationQuery, map[string]any{"id": runtimeID}, &result)
	if err != nil || result == nil {
		return nil, err
	}
	return result.RuntimeConfiguration, nil
}

func (c *graphQLClient) RuntimeOperationStatus(ctx context.Context, tenant, operationID string) (*gqlschema.OperationStatus, error) {
	var result *gqlschema.OperationStatus
	err := c.do(ctx, fmt.Sprintf("getting the status of operation %s", operationID), tenant, runtimeOperationStatusQuery, map[string]any{"id": operationID}, &result)
	return result, err
}

type graphQLRequest struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables,omitempty"`
}

type graphQLResponse struct {
	Data   *struct{ Result json.RawMessage } `json:"data"`
	Errors []graphQLError                    `json:"errors"`
}

type graphQLError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// do sends query with variables on behalf of tenant and decodes the field aliased "result" into
// result. what says what is being done, for wrapping errors.
func (c *graphQLClient) do(ctx context.Context, what, tenant, query string, variables map[string]any, result any) error {
	body, err := json.Marshal(graphQLRequest{Query: query, Variables: variables})
	if err != nil {
		return fmt.Errorf("while %s: encoding the GraphQL request: %w", what, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("while %s: creating the request to %s: %w", what, c.endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if tenant != "" {
		req.Header.Set(TenantHeader, tenant)
	}

	resp, err := c.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("while %s: calling the provisioner at %s: %w", what, c.endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("while %s: reading the provisioner's response: %w", what, err)
	}

	// The API answers request errors with a 4xx status and a GraphQL error body: decode the
	// body first, and fall back to the status when it is no GraphQL response.
	var gqlResp graphQLResponse
	if err := json.Unmarshal(raw, &gqlResp); err != nil || (gqlResp.Data == nil && len(gqlResp.Errors) == 0) {
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("while %s: the provisioner answered HTTP %d: %s", what, resp.StatusCode, snippet(raw))
		}
		if err != nil {
			return fmt.Errorf("while %s: decoding the provisioner's response: %w", what, err)
		}
		return fmt.Errorf("while %s: the provisioner's response has neither data nor errors", what)
	}
	if len(gqlResp.Errors) > 0 {
		return toAppErr(gqlResp.Errors[0])
	}
	if gqlResp.Data == nil || len(gqlResp.Data.Result) == 0 {
		return fmt.Errorf("while %s: the provisioner's response has no result", what)
	}
	if err := json.Unmarshal(gqlResp.Data.Result, result); err != nil {
		return fmt.Errorf("while %s: decoding the provisioner's result: %w", what, err)
	}
	return nil
}

// toAppErr turns an API error back into the *apperr.Error it was made of. An error without a
// code (not made by the provisioner's API) is INTERNAL.
func toAppErr(gqlErr graphQLError) *apperr.Error {
	code, _ := gqlErr.Extensions[extensionCode].(string)
	reason, _ := gqlErr.Extensions[extensionReason].(string)
	field, _ := gqlErr.Extensions[extensionField].(string)
	if code == "" {
		code = string(apperr.CodeInternal)
	}
	if reason == "" {
		reason = gqlErr.Message
	}
	return &apperr.Error{Code: apperr.Code(code), Field: field, Reason: reason}
}

func snippet(b []byte) string {
	const max = 512
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
