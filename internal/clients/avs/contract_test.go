package avs_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContract_Requests captures the client's requests on a loopback server and checks them
// against the AVS API as the original broker called it (testdata/contract.json): the operations,
// the creation's and the tag's bodies (threshold a string), and the password grant.
func TestContract_Requests(t *testing.T) {
	f := contracttest.Load(t, "testdata/contract.json")
	rec := contracttest.NewRecorder(t, func(w http.ResponseWriter, r contracttest.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Path == "/oauth/token":
			_, _ = w.Write([]byte(`{"access_token":"t","token_type":"bearer","expires_in":3600}`))
		case r.Method == http.MethodDelete && r.Path == "/api/v2/evaluationmetadata/1000/child/77":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":400,"message":"Evaluation 1000 does not contain subevaluation 77"}`))
		default:
			_, _ = w.Write([]byte(`{"id":77,"name":"rt","threshold":30000,"status":"ACTIVE","parent_id":1000,"tags":[],"dateCreated":1}`))
		}
	})
	c, err := avs.New(avs.Config{URL: rec.URL, OAuthURL: rec.URL + "/oauth/token", ClientID: "keb", OAuthUsername: "user", OAuthPassword: "pw",
		Timeout: 2 * time.Second, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: time.Millisecond})
	require.NoError(t, err)
	ctx := sandboxtest.Context(t, 10*time.Second)

	ev, err := c.CreateEvaluation(ctx, &avs.EvaluationRequest{Name: "rt", DefinitionType: "BASIC", URL: "https://x", CheckType: "HTTPSGET",
		Interval: 180, Timeout: 30000, Threshold: 30000, ParentID: 1000, Visibility: "PUBLIC"})
	require.NoError(t, err)
	assert.Equal(t, int64(30000), ev.Threshold)
	_, err = c.GetEvaluation(ctx, 77)
	require.NoError(t, err)
	_, err = c.AddTag(ctx, 77, avs.Tag{Content: "rt-1", TagClassID: 3})
	require.NoError(t, err)
	require.NoError(t, c.RemoveParent(ctx, 1000, 77), "400 does not contain subevaluation is done")
	require.NoError(t, c.DeleteEvaluation(ctx, 77))

	reqs := rec.Requests()
	require.Len(t, reqs, 6)
	tok := reqs[0]
	require.Equal(t, "/oauth/token", tok.Path)
	form, err := url.ParseQuery(string(tok.Body))
	require.NoError(t, err)
	assert.Equal(t, "password", form.Get("grant_type"))
	assert.Equal(t, "user", form.Get("username"))
	assert.Equal(t, "pw", form.Get("password"))
	assert.Contains(t, tok.Header.Get("Authorization"), "Basic ", "the client in the Authorization header")
	for _, r := range reqs[1:] {
		assert.Empty(t, f.Check(r, ""), "%s %s", r.Method, r.Path)
	}
	assert.Contains(t, string(reqs[1].Body), `"threshold":"30000"`)
	assert.Equal(t, http.MethodPost, reqs[3].Method, "tags go with POST")
}

// The answers the client decodes fit the fixture, and a body of the old client (threshold a
// number, a tag without its class name) does not.
func TestContract_Fixture(t *testing.T) {
	f := contracttest.Load(t, "testdata/contract.json")
	assert.NotEmpty(t, f.Check(contracttest.Request{Method: http.MethodPut, Path: "/api/v2/evaluationmetadata/1/tag"}, ""), "PUT tag")
	assert.NotEmpty(t, f.Check(contracttest.Request{Method: http.MethodGet, Path: "/api/v2/evaluationmetadata"}, ""), "list")
	assert.NotEmpty(t, f.Validate(map[string]any{"content": "x", "tag_class_id": 1}, "#tag", "tag"))
	body := map[string]any{}
	for _, k := range f.Schemas["evaluationRequest"].Required {
		body[k] = ""
	}
	assert.Contains(t, f.Validate(body, "#evaluationRequest", "create"), "create.interval: want integer, got string")
	body["threshold"] = 30000.0
	assert.Contains(t, f.Validate(body, "#evaluationRequest", "create"), "create.threshold: want string, got integer")
}
