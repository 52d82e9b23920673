package azurestandin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contract is the eventhubs client's fixture of ARM's long-running operations.
const contract = "../../clients/eventhubs/testdata/contract.json"

func lroEnv(t *testing.T, mode string) *env {
	t.Helper()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := options(clock)
	o.LongRunning, o.LongRunningPolls, o.LongRunningTime = mode, 2, 10*time.Minute
	return serve(t, clock, azurestandin.New(o))
}

// send sends an authorised request to an absolute URL and returns the response (body read).
func (e *env) send(method, target, body string) (*http.Response, string) {
	e.t.Helper()
	return sandboxtest.Send(e.t, sandboxtest.APIRequest(e.t, method, target, e.token, body))
}

// accepted creates rg/name, which the stand-in answers 202 Accepted, and returns the answer.
func (e *env) accepted(name string) *http.Response {
	e.t.Helper()
	status, body := e.arm(http.MethodPut, rgPath+"rg"+rgAPI, `{"location":"westeurope"}`)
	require.Contains(e.t, []int{http.StatusOK, http.StatusCreated}, status, body)
	resp, body := e.send(http.MethodPut, e.url+nsPath("rg", name)+ehAPI, nsBody)
	require.Equal(e.t, http.StatusAccepted, resp.StatusCode, body)
	assert.Empty(e.t, body, "202 Accepted has no body")
	return resp
}

// The PUT's 202 carries absolute URLs on the request's host and a Retry-After in whole seconds
// within ARM's bounds; the namespace is hidden and a second PUT refused while the operation runs;
// the Azure-AsyncOperation URL answers 200 with the status, InProgress twice, then Succeeded.
func TestLongRunningCreation_AzureAsyncOperation(t *testing.T) {
	fx := contracttest.Load(t, contract)
	e := lroEnv(t, azurestandin.LongRunningAll)
	resp := e.accepted("kyma-ns-1")
	ops, loc := resp.Header.Get("Azure-AsyncOperation"), resp.Header.Get("Location")
	for _, u := range []string{ops, loc} {
		p, err := url.Parse(u)
		require.NoError(t, err)
		assert.True(t, p.IsAbs(), u)
		assert.Equal(t, strings.TrimPrefix(e.url, "http://"), p.Host, "the request's host")
		assert.Equal(t, azurestandin.EventHubAPIVersion, p.Query().Get("api-version"))
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After is whole seconds")
	assert.GreaterOrEqual(t, float64(secs), fx.Facts["retryAfterMinSeconds"])
	assert.LessOrEqual(t, float64(secs), fx.Facts["retryAfterMaxSeconds"])

	status, body := e.arm(http.MethodGet, nsPath("rg", "kyma-ns-1")+ehAPI, "")
	assert.Equal(t, http.StatusNotFound, status, "invisible until the operation is over")
	assert.Equal(t, "ResourceNotFound", armCode(t, body))
	status, body = e.arm(http.MethodPut, nsPath("rg", "kyma-ns-1")+ehAPI, nsBody)
	assert.Equal(t, http.StatusConflict, status, "another operation is in progress")
	assert.Equal(t, "Conflict", armCode(t, body))

	for i, want := range []string{"InProgress", "InProgress", "Succeeded", "Succeeded"} {
		resp, body := e.send(http.MethodGet, ops, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "the status is read with 200: %s", body)
		var st map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &st))
		assert.Empty(t, fx.Validate(st, "#OperationResource", "status"), body)
		assert.Equal(t, want, st["status"], "read %d", i+1)
		if want == "InProgress" {
			assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		} else {
			assert.NotEmpty(t, st["endTime"])
		}
	}
	status, body = e.arm(http.MethodGet, nsPath("rg", "kyma-ns-1")+ehAPI, "")
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"provisioningState":"Succeeded"`)
	status, body = e.arm(http.MethodPost, nsPath("rg", "kyma-ns-1")+"/authorizationRules/"+azurestandin.RootRule+"/listKeys"+ehAPI, "")
	assert.Equal(t, http.StatusOK, status, body)
	snap := e.st.Snapshot()
	assert.Equal(t, 4, snap.Calls["operation.status"])
	assert.Equal(t, 1, snap.NamespaceCreatesByName["kyma-ns-1"])
}

// The Location URL answers 202 with no body while the operation runs, then the namespace; a
// failed operation answers its error there and in its status.
func TestLongRunningCreation_LocationAndFailure(t *testing.T) {
	fx := contracttest.Load(t, contract)
	e := lroEnv(t, azurestandin.LongRunningAll)
	loc := e.accepted("kyma-ns-2").Header.Get("Location")
	for range 2 {
		resp, body := e.send(http.MethodGet, loc, "")
		require.Equal(t, int(fx.Facts["locationInProgressStatus"].(float64)), resp.StatusCode, body)
		assert.Empty(t, body)
		assert.Equal(t, loc, resp.Header.Get("Location"))
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	}
	resp, body := e.send(http.MethodGet, loc, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, body, `"name":"kyma-ns-2"`)

	f := lroEnv(t, azurestandin.LongRunningFail)
	acc := f.accepted("kyma-ns-3")
	var st map[string]any
	for range 3 {
		_, body = f.send(http.MethodGet, acc.Header.Get("Azure-AsyncOperation"), "")
		require.NoError(t, json.Unmarshal([]byte(body), &st))
	}
	assert.Equal(t, "Failed", st["status"])
	assert.Empty(t, fx.Validate(st, "#OperationResource", "status"), "a failure has its code and message")
	assert.Equal(t, azurestandin.CodeCreationFailed, st["error"].(map[string]any)["code"])
	resp, body = f.send(http.MethodGet, acc.Header.Get("Location"), "")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, azurestandin.CodeCreationFailed, armCode(t, body))
	status, _ := f.arm(http.MethodGet, nsPath("rg", "kyma-ns-3")+ehAPI, "")
	assert.Equal(t, http.StatusNotFound, status, "a failed creation leaves no namespace")
	resp, _ = f.send(http.MethodPut, f.url+nsPath("rg", "kyma-ns-3")+ehAPI, nsBody)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode, "a PUT tries again")
}

// The operation URLs are ARM's: a token, the api-version and the operation's region are required.
func TestLongRunningCreation_OperationURLsRefuseBadRequests(t *testing.T) {
	e := lroEnv(t, azurestandin.LongRunningAll)
	ops := e.accepted("kyma-ns-4").Header.Get("Azure-AsyncOperation")
	noVersion, _, _ := strings.Cut(ops, "?")
	status, body := sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodGet, noVersion, e.token, ""))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "MissingApiVersionParameter", armCode(t, body))
	status, _ = sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodGet, ops, "", ""))
	assert.Equal(t, http.StatusUnauthorized, status)
	status, _ = sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodGet, strings.Replace(ops, "/westeurope/", "/northeurope/", 1), e.token, ""))
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = sandboxtest.Do(t, sandboxtest.APIRequest(t, http.MethodDelete, ops, e.token, ""))
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	for _, want := range []string{"InProgress", "InProgress", "Succeeded"} {
		_, body := e.send(http.MethodGet, ops, "")
		assert.Contains(t, body, `"status":"`+want+`"`, "none of the refused requests counted as a read")
	}
}

// An operation nobody reads ends after LongRunningTime; the default mode answers some creations
// 202, always the same ones; an unknown mode is refused.
func TestLongRunningCreation_ModesAndTime(t *testing.T) {
	e := lroEnv(t, azurestandin.LongRunningAll)
	e.accepted("kyma-ns-5")
	e.clock.Advance(10 * time.Minute)
	status, body := e.arm(http.MethodGet, nsPath("rg", "kyma-ns-5")+ehAPI, "")
	assert.Equal(t, http.StatusOK, status, body)

	// which names the default mode answers 202 Accepted, in two stand-ins
	var picks []string
	for range 2 {
		clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		o := options(clock)
		o.LongRunning = ""
		s := serve(t, clock, azurestandin.New(o))
		status, _ := s.arm(http.MethodPut, rgPath+"rg"+rgAPI, `{"location":"westeurope"}`)
		require.Equal(t, http.StatusCreated, status)
		pick := ""
		for i := range 20 {
			status, _ := s.arm(http.MethodPut, nsPath("rg", fmt.Sprintf("kyma-some-%02d", i))+ehAPI, nsBody)
			require.Contains(t, []int{http.StatusCreated, http.StatusAccepted}, status)
			pick += map[int]string{http.StatusCreated: "s", http.StatusAccepted: "A"}[status]
		}
		picks = append(picks, pick)
	}
	assert.Contains(t, picks[0], "A", "some creations are long-running")
	assert.Contains(t, picks[0], "s", "not all")
	assert.Equal(t, picks[0], picks[1], "the same names each time")

	_, err := azurestandin.Open(context.Background(), azurestandin.Options{LongRunning: "sometimes", Store: durable.NewMemoryStore()})
	assert.ErrorContains(t, err, `long-running mode "sometimes"`)
}

// A running operation survives a restart of the stand-in.
func TestLongRunningCreation_SurvivesARestart(t *testing.T) {
	store := durable.NewMemoryStore()
	clock := sandboxtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(ctx context.Context, store durable.Store) (*azurestandin.Server, error) {
		o := options(clock)
		o.LongRunning, o.Store = azurestandin.LongRunningAll, store
		return azurestandin.Open(ctx, o)
	}
	e := serve(t, clock, sandboxtest.Open(t, open, store))
	ops := e.accepted("kyma-ns-6").Header.Get("Azure-AsyncOperation")
	resp, body := e.send(http.MethodGet, ops, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	e2 := serve(t, clock, sandboxtest.Reopen(t, open, store, e.st.Snapshot()))
	path := ops[strings.Index(ops, "/azure/"):]
	for _, want := range []string{`"status":"InProgress"`, `"status":"Succeeded"`} {
		status, body := e2.arm(http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, status, body)
		assert.Contains(t, body, want)
	}
}
