package runtimeagent

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director/directorschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every request the agent sends the Director is valid under the real schema, with its variables
// as they travel (JSON): applicationsForRuntime, first page and next, and setRuntimeLabel with the
// label keys the agent sets, which must match the Director's label key pattern.
func TestContractAgentRequestsAreValidForTheDirector(t *testing.T) {
	schema, err := directorschema.Load()
	require.NoError(t, err)
	facts := directorschema.LoadFacts()
	asJSON := func(vars map[string]any) map[string]any {
		b, err := json.Marshal(vars)
		require.NoError(t, err)
		var out map[string]any
		require.NoError(t, json.Unmarshal(b, &out))
		return out
	}
	for name, req := range map[string]struct {
		query string
		vars  map[string]any
	}{
		"applications, first page": {queryApplications, map[string]any{"runtimeID": "rt", "first": pageSize}},
		"applications, next page":  {queryApplications, map[string]any{"runtimeID": "rt", "first": pageSize, "after": "Y3Vyc29y"}},
		"events URL label":         {mutationSetLabel, map[string]any{"runtimeID": "rt", "key": LabelEventServiceURL, "value": "https://gateway.example"}},
		"console URL label":        {mutationSetLabel, map[string]any{"runtimeID": "rt", "key": LabelConsoleURL, "value": "https://console.example"}},
		"runtime read":             {queryRuntime, map[string]any{"id": "rt"}},
		"status condition": {mutationUpdateRuntime, map[string]any{"id": "rt", "in": map[string]any{
			"name": "rt", "description": "d", "labels": map[string]any{"kyma_runtime_id": "x"}, "statusCondition": ConditionFailed}}},
	} {
		assert.NoError(t, directorschema.Validate(schema, req.query, asJSON(req.vars)), name)
		if k, ok := req.vars["key"].(string); ok {
			assert.Regexp(t, regexp.MustCompile(facts.LabelKey.Pattern), k, name)
		}
	}
}

// The agent reads what the Director answers to its query: a bundle's defaultInstanceAuth
// credential (a union member's fields) and the application's system auths.
func TestContractAgentDecodesTheDirectorsAnswer(t *testing.T) {
	const answer = `{"id":"a1","name":"shop","description":null,"providerName":"SAP","labels":{"x":"y"},"auths":[{"id":"auth-1"}],
		"bundles":{"data":[{"id":"b1","name":"orders","description":null,"defaultInstanceAuth":{"credential":{"username":"u","password":"p"}}},
		{"id":"b2","name":"events","description":"e","defaultInstanceAuth":null}]}}`
	var app DirectorApplication
	require.NoError(t, json.Unmarshal([]byte(answer), &app))
	a := &Agent{cfg: Config{CredentialsNamespace: "ns"}}
	d, err := a.desiredApplication("rt", app)
	require.NoError(t, err)
	assert.Equal(t, []string{"auth-1"}, d.app.Spec.CompassMetadata.Authentication.ClientIDs)
	require.Len(t, d.secrets, 1)
	assert.Equal(t, map[string][]byte{"username": []byte("u"), "password": []byte("p")}, d.secrets[0].Data)
	assert.Equal(t, "Basic", d.app.Spec.Services[0].Entries[0].Credentials.Type)
	assert.Equal(t, []Entry{}, d.app.Spec.Services[1].Entries)
}

// The facts of testdata/status_condition.json: the conditions the agent reports are values of
// the Director's RuntimeStatusCondition, and it sets them as the original agent did, reading the
// runtime and writing it back with updateRuntime.
func TestContractStatusConditionFacts(t *testing.T) {
	raw, err := os.ReadFile("testdata/status_condition.json")
	require.NoError(t, err)
	var facts struct {
		Conditions []string `json:"conditions"`
		Sources    []struct {
			Repository string `json:"repository"`
			Commit     string `json:"commit"`
		} `json:"sources"`
	}
	require.NoError(t, json.Unmarshal(raw, &facts))
	for _, s := range facts.Sources {
		assert.Regexp(t, `^[0-9a-f]{40}$`, s.Commit, s.Repository)
	}
	schema, err := directorschema.Load()
	require.NoError(t, err)
	enum := schema.Types["RuntimeStatusCondition"]
	require.NotNil(t, enum)
	var values []string
	for _, v := range enum.EnumValues {
		values = append(values, v.Name)
	}
	assert.Equal(t, facts.Conditions, values)
	assert.Contains(t, values, ConditionConnected)
	assert.Contains(t, values, ConditionFailed)
	assert.Contains(t, queryRuntime, "runtime(id: $id) { id name description labels")
	assert.Contains(t, mutationUpdateRuntime, "updateRuntime(id: $id, in: $in)")
}
