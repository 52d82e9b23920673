package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/api"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/provisionertest"
)

// kebDocuments is testdata/keb_documents.yaml.
type kebDocuments struct {
	Documents []kebDocument `json:"documents"`
}

type kebDocument struct {
	Name     string            `json:"name"`
	Origin   string            `json:"origin"`
	Headers  map[string]string `json:"headers"`
	Document string            `json:"document"`
	// RealVersions are the real schema's versions the document is valid against, all when empty.
	RealVersions []string `json:"realVersions"`
}

type docVars struct{ Name, RuntimeID, OperationID string }

func loadKEBDocuments(t *testing.T) map[string]kebDocument {
	t.Helper()
	raw, err := os.ReadFile("testdata/keb_documents.yaml")
	require.NoError(t, err)
	var f kebDocuments
	require.NoError(t, yaml.Unmarshal(raw, &f))
	docs := map[string]kebDocument{}
	for _, d := range f.Documents {
		require.NotContains(t, docs, d.Name, "document names are unique")
		require.Contains(t, []string{"keb", "schema"}, d.Origin, d.Name)
		docs[d.Name] = d
	}
	require.NotEmpty(t, docs)
	return docs
}

func render(t *testing.T, d kebDocument, v docVars) string {
	t.Helper()
	tmpl, err := template.New(d.Name).Option("missingkey=error").Parse(d.Document)
	require.NoError(t, err, d.Name)
	var b strings.Builder
	require.NoError(t, tmpl.Execute(&b, v), d.Name)
	return b.String()
}

// TestKEBDocumentsValidate validates every document against our schema and against the real
// provisioner's (both versions of testdata/real_schema_facts.json, rebuilt as SDL), so the
// fixture is proven to be documents the real schema accepts.
func TestKEBDocumentsValidate(t *testing.T) {
	docs := loadKEBDocuments(t)
	schemas := map[string]*ast.Schema{"ours": gqlschema.NewExecutableSchema(gqlschema.Config{}).Schema()}
	for name, sdl := range realSchemasSDL(t) {
		s, err := gqlparser.LoadSchema(&ast.Source{Name: name, Input: sdl})
		require.NoError(t, err, "the real schema %s rebuilt from the facts", name)
		schemas["real "+name] = s
	}
	for _, name := range sortedNames(docs) {
		text := render(t, docs[name], docVars{Name: "rt-1", RuntimeID: "rt-1", OperationID: "op-1"})
		query, err := parser.ParseQuery(&ast.Source{Name: name, Input: text})
		require.NoError(t, err, name)
		for sname, s := range schemas {
			version, isReal := strings.CutPrefix(sname, "real ")
			if isReal && len(docs[name].RealVersions) > 0 && !slices.Contains(docs[name].RealVersions, version) {
				assert.NotEmpty(t, validator.Validate(s, query), "%s against %s, which it is said to be invalid against", name, sname)
				continue
			}
			assert.Empty(t, validator.Validate(s, query), "%s against %s", name, sname)
		}
	}
}

// TestKEBDocumentsWork sends every document to the API served over HTTP by a real provisioner
// (simulated infrastructure) in the order the original KEB does, and checks the answers.
func TestKEBDocumentsWork(t *testing.T) {
	docs := loadKEBDocuments(t)
	env := provisionertest.New(t, provisionertest.Options{})
	log := logrus.New()
	log.SetOutput(io.Discard)
	srv := httptest.NewServer(api.NewHandler(env.Provisioner.Service, api.Config{}, log))
	t.Cleanup(srv.Close)
	c := &docClient{t: t, url: srv.URL + api.DefaultEndpoint, http: srv.Client(), docs: docs, used: map[string]bool{}}

	runtimes := map[string]string{}
	for _, tc := range []struct{ provider, doc, name, wantOp string }{
		{"gcp", "provisionRuntime-gcp", "keb-gcp", "ProvisionNoInstall"},
		{"azure", "provisionRuntime-azure", "keb-azure", "ProvisionNoInstall"},
		{"aws", "provisionRuntime-aws-with-kyma", "keb-aws", "Provision"},
		{"openstack", "provisionRuntime-openstack", "keb-openstack", "ProvisionNoInstall"},
		{"openstack-later", "provisionRuntime-openstack-later", "keb-openstack-2", "ProvisionNoInstall"},
	} {
		var res struct{ Result operationStatus }
		c.run(tc.doc, docVars{Name: tc.name}, &res)
		assert.Equal(t, tc.wantOp, res.Result.Operation, tc.doc)
		require.NotEmpty(t, res.Result.RuntimeID, tc.doc)
		require.NotEmpty(t, res.Result.ID, tc.doc)
		assert.Nil(t, res.Result.LastError, tc.doc)
		runtimes[tc.provider] = res.Result.RuntimeID
		c.waitSucceeded(res.Result.ID, tc.wantOp)
	}

	// The sub-account header is the runtime's subaccount.
	rt, err := env.Store.Runtimes().GetRuntime(context.Background(), runtimes["azure"])
	require.NoError(t, err)
	cfg, err := operations.DecodeRuntimeConfig(rt)
	require.NoError(t, err)
	assert.Equal(t, "subaccount-azure", cfg.SubAccountID)

	// runtimeStatus as the original KEB asks it: the union's fragments give each provider's
	// configuration.
	status := func(provider string) map[string]any {
		var res struct{ Result map[string]any }
		c.run("runtimeStatus", docVars{RuntimeID: runtimes[provider]}, &res)
		return res.Result
	}
	gcp := status("gcp")
	assert.Equal(t, "ProvisionNoInstall", dig(gcp, "lastOperationStatus", "operation"))
	assert.Equal(t, "Succeeded", dig(gcp, "lastOperationStatus", "state"))
	assert.NotEmpty(t, dig(gcp, "runtimeConnectionStatus", "status"))
	assert.NotEmpty(t, dig(gcp, "runtimeConfiguration", "kubeconfig"))
	assert.Nil(t, dig(gcp, "runtimeConfiguration", "kymaConfig"), "provisioned without Kyma")
	cluster := dig(gcp, "runtimeConfiguration", "clusterConfig").(map[string]any)
	assert.Equal(t, "keb-gcp", cluster["name"])
	assert.Equal(t, "1.26.8", cluster["kubernetesVersion"])
	assert.Equal(t, "n2-standard-8", cluster["machineType"])
	assert.Equal(t, "pd-standard", cluster["diskType"])
	assert.Equal(t, json.Number("80"), cluster["volumeSizeGB"])
	assert.Equal(t, json.Number("20"), cluster["autoScalerMax"])
	assert.Equal(t, map[string]any{"zones": []any{"europe-west3-a", "europe-west3-b", "europe-west3-c"}}, cluster["providerSpecificConfig"])
	assert.Equal(t, map[string]any{
		"clientID": "9bd05ed7-a930-44e6-8c79-e6defeb7dec9", "issuerURL": "https://kymatest.accounts400.ondemand.com",
		"groupsClaim": "groups", "signingAlgs": []any{"RS256"}, "usernameClaim": "sub", "usernamePrefix": "-",
	}, cluster["oidcConfig"])

	azure := status("azure")
	assert.Equal(t, map[string]any{"vnetCidr": "10.250.0.0/16"}, dig(azure, "runtimeConfiguration", "clusterConfig", "providerSpecificConfig"))
	assert.Nil(t, dig(azure, "runtimeConfiguration", "clusterConfig", "oidcConfig"))

	aws := status("aws")
	assert.Equal(t, map[string]any{"vpcCidr": "10.250.0.0/16", "awsZones": []any{
		map[string]any{"name": "eu-central-1a", "workerCidr": "10.250.0.0/19", "publicCidr": "10.250.32.0/20", "internalCidr": "10.250.48.0/20"},
		map[string]any{"name": "eu-central-1b", "workerCidr": "10.250.64.0/19", "publicCidr": "10.250.96.0/20", "internalCidr": "10.250.112.0/20"},
	}}, dig(aws, "runtimeConfiguration", "clusterConfig", "providerSpecificConfig"))
	assert.Equal(t, "1.24.8", dig(aws, "runtimeConfiguration", "kymaConfig", "version"))
	assert.Equal(t, "Provision", dig(aws, "lastOperationStatus", "operation"))

	// The original KEB selects no OpenStack fragment: the union's member answers no fields.
	openstack := status("openstack")
	assert.Equal(t, map[string]any{}, dig(openstack, "runtimeConfiguration", "clusterConfig", "providerSpecificConfig"))

	// What the original KEB sends but does not select is stored and answered.
	readBack := func(provider string) map[string]any {
		var res struct{ Result map[string]any }
		c.run("clusterConfigReadBack", docVars{RuntimeID: runtimes[provider]}, &res)
		return dig(res.Result, "runtimeConfiguration", "clusterConfig").(map[string]any)
	}
	gcpBack := readBack("gcp")
	assert.Equal(t, "10.96.0.0/13", gcpBack["podsCidr"])
	assert.Equal(t, "10.104.0.0/13", gcpBack["servicesCidr"])
	assert.Equal(t, "zone", gcpBack["controlPlaneFailureTolerance"])
	assert.Equal(t, true, gcpBack["shootNetworkingFilterDisabled"])
	assert.Equal(t, true, gcpBack["euAccess"])
	assert.Equal(t, "gardenlinux", gcpBack["machineImage"])
	assert.Equal(t, "934.10.0", gcpBack["machineImageVersion"])
	assert.Equal(t, map[string]any{"domain": "keb-gcp.kyma.example.com", "providers": []any{map[string]any{
		"domainsInclude": []any{"keb-gcp.kyma.example.com"}, "primary": true, "secretName": "aws_dns_domain_secrets_test_intest", "type": "route53_type_test",
	}}}, gcpBack["dnsConfig"])
	assert.Equal(t, "GCPProviderConfig", dig(gcpBack, "providerSpecificConfig", "__typename"))

	azureBack := readBack("azure")
	assert.Equal(t, "node", azureBack["controlPlaneFailureTolerance"])
	assert.Equal(t, false, azureBack["shootNetworkingFilterDisabled"])
	assert.Equal(t, "internet", azureBack["exposureClassName"])
	assert.Equal(t, "TestDevelopmentAndDemo", azureBack["licenceType"])
	assert.Nil(t, azureBack["podsCidr"])
	assert.Nil(t, azureBack["dnsConfig"])
	assert.Equal(t, map[string]any{"__typename": "AzureProviderConfig", "enableNatGateway": true, "azureZones": []any{
		map[string]any{"name": json.Number("1"), "cidr": "10.250.0.0/19"},
		map[string]any{"name": json.Number("2"), "cidr": "10.250.32.0/19"},
		map[string]any{"name": json.Number("3"), "cidr": "10.250.64.0/19"},
	}}, azureBack["providerSpecificConfig"])

	assert.Equal(t, map[string]any{"__typename": "OpenStackProviderConfig", "zones": []any{"eu-de-1a"},
		"floatingPoolName": "FloatingIP-external-kyma-01", "cloudProfileName": "converged-cloud-kyma", "loadBalancerProvider": "f5",
	}, readBack("openstack")["providerSpecificConfig"])
	assert.Equal(t, map[string]any{"__typename": "AWSProviderConfig", "vpcCidr": "10.250.0.0/16"}, readBack("aws")["providerSpecificConfig"])
	assert.Equal(t, map[string]any{"__typename": "OpenStackProviderConfig", "zones": []any{"eu-de-2a", "eu-de-2b"},
		"floatingPoolName": "FloatingIP-external-kyma-01", "cloudProfileName": "converged-cloud-kyma", "loadBalancerProvider": "f5",
	}, readBack("openstack-later")["providerSpecificConfig"], "the real provisioner's defaults")

	// The infrastructure is given what was sent.
	rt, err = env.Store.Runtimes().GetRuntime(context.Background(), runtimes["gcp"])
	require.NoError(t, err)
	cfg, err = operations.DecodeRuntimeConfig(rt)
	require.NoError(t, err)
	assert.Equal(t, "10.96.0.0/13", cfg.Cluster.PodsCidr)
	assert.Equal(t, "10.104.0.0/13", cfg.Cluster.ServicesCidr)
	assert.Equal(t, "zone", cfg.Cluster.ControlPlaneFailureTolerance)
	assert.True(t, cfg.Cluster.ShootNetworkingFilterDisabled)
	assert.True(t, cfg.Cluster.EuAccess)
	require.NotNil(t, cfg.Cluster.DNS)
	assert.Equal(t, "keb-gcp.kyma.example.com", cfg.Cluster.DNS.Domain)
	assert.JSONEq(t, `{"gcpConfig": {"zones": ["europe-west3-a", "europe-west3-b", "europe-west3-c"]}}`, string(cfg.Cluster.ProviderConfig))

	// upgradeShoot, then the shoot's new configuration.
	var up struct{ Result operationStatus }
	c.run("upgradeShoot", docVars{RuntimeID: runtimes["gcp"]}, &up)
	assert.Equal(t, "UpgradeShoot", up.Result.Operation)
	assert.Equal(t, runtimes["gcp"], up.Result.RuntimeID)
	c.waitSucceeded(up.Result.ID, "UpgradeShoot")
	gcp = status("gcp")
	assert.Equal(t, "UpgradeShoot", dig(gcp, "lastOperationStatus", "operation"))
	assert.Equal(t, "1.27.4", dig(gcp, "runtimeConfiguration", "clusterConfig", "kubernetesVersion"))
	assert.Equal(t, "n2-standard-16", dig(gcp, "runtimeConfiguration", "clusterConfig", "machineType"))
	assert.Equal(t, json.Number("30"), dig(gcp, "runtimeConfiguration", "clusterConfig", "autoScalerMax"))
	assert.Equal(t, "new-client", dig(gcp, "runtimeConfiguration", "clusterConfig", "oidcConfig", "clientID"))
	assert.Equal(t, []any{"RS256", "RS384"}, dig(gcp, "runtimeConfiguration", "clusterConfig", "oidcConfig", "signingAlgs"))
	assert.Equal(t, false, readBack("gcp")["shootNetworkingFilterDisabled"], "upgradeShoot changes the networking filter")

	// upgradeRuntime of the runtime with Kyma.
	c.run("upgradeRuntime", docVars{RuntimeID: runtimes["aws"]}, &up)
	assert.Equal(t, "Upgrade", up.Result.Operation)
	c.waitSucceeded(up.Result.ID, "Upgrade")
	assert.Equal(t, "1.24.9", dig(status("aws"), "runtimeConfiguration", "kymaConfig", "version"))

	// reconnectRuntimeAgent answers the operation's ID.
	var id struct{ Result string }
	c.run("reconnectRuntimeAgent", docVars{RuntimeID: runtimes["gcp"]}, &id)
	require.NotEmpty(t, id.Result)
	c.waitSucceeded(id.Result, "ReconnectRuntime")

	// hibernateRuntime and hibernationStatus.
	hibernation := func(provider string) map[string]any {
		var res struct{ Result map[string]any }
		c.run("hibernationStatus", docVars{RuntimeID: runtimes[provider]}, &res)
		return res.Result["hibernationStatus"].(map[string]any)
	}
	assert.Equal(t, map[string]any{"hibernated": false, "hibernationPossible": true}, hibernation("azure"))
	c.run("hibernateRuntime", docVars{RuntimeID: runtimes["azure"]}, &up)
	assert.Equal(t, "Hibernate", up.Result.Operation)
	c.waitSucceeded(up.Result.ID, "Hibernate")
	assert.Equal(t, map[string]any{"hibernated": true, "hibernationPossible": false}, hibernation("azure"))

	// rollBackUpgradeOperation validates and is refused, as by the real provisioner.
	errs := c.runFailing("rollBackUpgradeOperation", docVars{RuntimeID: runtimes["aws"]})
	assert.Equal(t, "NOT_SUPPORTED", errs[0].Extensions["code"], errs[0].Message)
	// The original KEB takes a 4xx error_code as not worth a retry and error_reason
	// err_db_not_found as a missing runtime.
	assert.Equal(t, json.Number("400"), errs[0].Extensions["error_code"])
	errs = c.runFailing("rollBackUpgradeOperation", docVars{RuntimeID: "no-such-runtime"})
	assert.Equal(t, "NOT_FOUND", errs[0].Extensions["code"], errs[0].Message)
	assert.Equal(t, "err_db_not_found", errs[0].Extensions["error_reason"])
	errs = c.runFailing("runtimeStatus", docVars{RuntimeID: "no-such-runtime"})
	assert.Equal(t, "err_db_not_found", errs[0].Extensions["error_reason"])

	// deprovisionRuntime answers the operation's ID.
	for provider, wantOp := range map[string]string{
		"gcp": "DeprovisionNoInstall", "azure": "DeprovisionNoInstall", "aws": "Deprovision", "openstack": "DeprovisionNoInstall", "openstack-later": "DeprovisionNoInstall",
	} {
		c.run("deprovisionRuntime", docVars{RuntimeID: runtimes[provider]}, &id)
		require.NotEmpty(t, id.Result, provider)
		c.waitSucceeded(id.Result, wantOp)
	}

	for _, name := range sortedNames(docs) {
		assert.True(t, c.used[name], "document %s is not sent by the test", name)
	}
}

type operationStatus struct {
	ID        string         `json:"id"`
	Operation string         `json:"operation"`
	State     string         `json:"state"`
	Message   string         `json:"message"`
	RuntimeID string         `json:"runtimeID"`
	LastError map[string]any `json:"lastError"`
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// docClient sends the fixture's documents as the original KEB does: a POST of the document
// alone, with its headers.
type docClient struct {
	t    *testing.T
	url  string
	http *http.Client
	docs map[string]kebDocument
	used map[string]bool
}

func (c *docClient) send(name string, v docVars) (json.RawMessage, []gqlError) {
	c.t.Helper()
	d, ok := c.docs[name]
	require.True(c.t, ok, "no document %s", name)
	c.used[name] = true
	body, err := json.Marshal(map[string]string{"query": render(c.t, d, v)})
	require.NoError(c.t, err)
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range d.Headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	var out struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	require.NoError(c.t, dec.Decode(&out), name)
	for _, e := range out.Errors {
		code, _ := e.Extensions["code"].(string)
		require.NotContains(c.t, []string{"GRAPHQL_VALIDATION_FAILED", "GRAPHQL_PARSE_FAILED"}, code, "%s: %s", name, e.Message)
	}
	return out.Data, out.Errors
}

// run sends the document and decodes its data into result; it fails on any error.
func (c *docClient) run(name string, v docVars, result any) {
	c.t.Helper()
	data, errs := c.send(name, v)
	require.Empty(c.t, errs, name)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	require.NoError(c.t, dec.Decode(result), name)
}

// runFailing sends a document that must validate but fail in its resolver.
func (c *docClient) runFailing(name string, v docVars) []gqlError {
	c.t.Helper()
	_, errs := c.send(name, v)
	require.NotEmpty(c.t, errs, name)
	return errs
}

// waitSucceeded polls runtimeOperationStatus, as the original KEB does, until the operation
// has finished; it must have succeeded and be of type wantOp.
func (c *docClient) waitSucceeded(operationID, wantOp string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res struct{ Result operationStatus }
		c.run("runtimeOperationStatus", docVars{OperationID: operationID}, &res)
		require.Equal(c.t, wantOp, res.Result.Operation)
		require.Equal(c.t, operationID, res.Result.ID)
		switch res.Result.State {
		case "Succeeded":
			return
		case "Failed":
			c.t.Fatalf("operation %s (%s) failed: %s %v", operationID, wantOp, res.Result.Message, res.Result.LastError)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("operation %s (%s) still %s", operationID, wantOp, res.Result.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// realSchemasSDL rebuilds the real provisioner's schema versions as SDL from the facts in
// ../gqlschema/testdata/real_schema_facts.json.
func realSchemasSDL(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../gqlschema/testdata/real_schema_facts.json")
	require.NoError(t, err)
	var facts struct {
		Versions []struct {
			Name  string `json:"name"`
			Types map[string]struct {
				Kind   string `json:"kind"`
				Fields map[string]struct {
					Type string            `json:"type"`
					Args map[string]string `json:"args"`
				} `json:"fields"`
				Members []string `json:"members"`
				Values  []string `json:"values"`
			} `json:"types"`
		} `json:"versions"`
	}
	require.NoError(t, json.Unmarshal(raw, &facts))
	out := map[string]string{}
	for _, v := range facts.Versions {
		var b strings.Builder
		for _, name := range sortedNames(v.Types) {
			ty := v.Types[name]
			switch ty.Kind {
			case "SCALAR":
				fmt.Fprintf(&b, "scalar %s\n", name)
			case "ENUM":
				fmt.Fprintf(&b, "enum %s { %s }\n", name, strings.Join(ty.Values, " "))
			case "UNION":
				fmt.Fprintf(&b, "union %s = %s\n", name, strings.Join(ty.Members, " | "))
			case "OBJECT", "INPUT_OBJECT":
				kw := "type"
				if ty.Kind == "INPUT_OBJECT" {
					kw = "input"
				}
				fmt.Fprintf(&b, "%s %s {\n", kw, name)
				for _, fname := range sortedNames(ty.Fields) {
					f := ty.Fields[fname]
					var args []string
					for _, a := range sortedNames(f.Args) {
						args = append(args, a+": "+f.Args[a])
					}
					if len(args) > 0 {
						fmt.Fprintf(&b, "  %s(%s): %s\n", fname, strings.Join(args, ", "), f.Type)
					} else {
						fmt.Fprintf(&b, "  %s: %s\n", fname, f.Type)
					}
				}
				b.WriteString("}\n")
			default:
				t.Fatalf("type %s: unknown kind %s", name, ty.Kind)
			}
		}
		out[v.Name] = b.String()
	}
	return out
}
