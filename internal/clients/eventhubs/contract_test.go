package eventhubs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/contracttest"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeARM answers as ARM does by the contract's facts (testdata/contract.json): the namespace is
// missing until created, its PUT answers 202 Accepted with no body and the operation's absolute
// URLs, and the operation's status is what status returns for the n-th read.
type fakeARM struct {
	rec *contracttest.Recorder
	mu  sync.Mutex
	// status answers the n-th (from 1) read of the Azure-AsyncOperation URL: HTTP status and body.
	status func(n int) (int, string)
	// result answers the n-th read of the Location URL.
	result func(n int) (int, string)
	// accepted sets the 202's headers; base is the recorder's URL.
	accepted       func(h http.Header, base string)
	statusReads    int
	resultReads    int
	namespaceReady bool
}

const (
	nsARMPath = "/subscriptions/" + subscription + "/resourceGroups/rg-c/providers/Microsoft.EventHub/namespaces/kyma-contract"
	opsPath   = "/subscriptions/" + subscription + "/providers/Microsoft.EventHub/locations/westeurope/"
	nsJSON    = `{"id":"` + nsARMPath + `","name":"kyma-contract","location":"westeurope","sku":{"name":"Standard","tier":"Standard","capacity":1},"properties":{"provisioningState":"Succeeded","kafkaEnabled":true}}`
)

func newFakeARM(t *testing.T) *fakeARM {
	f := &fakeARM{
		status: func(int) (int, string) { return http.StatusOK, `{"status":"Succeeded"}` },
		result: func(int) (int, string) { return http.StatusOK, nsJSON },
		accepted: func(h http.Header, base string) {
			h.Set("Azure-AsyncOperation", base+opsPath+"operationStatuses/op-1?api-version=2021-11-01")
			h.Set("Location", base+opsPath+"operationResults/op-1?api-version=2021-11-01")
			h.Set("Retry-After", "20")
		},
	}
	f.rec = contracttest.NewRecorder(t, f.answer)
	return f
}

func (f *fakeARM) answer(w http.ResponseWriter, r contracttest.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	write := func(status int, body string) {
		if body != "" {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
	switch {
	case strings.HasSuffix(r.Path, "/oauth2/v2.0/token"):
		write(http.StatusOK, `{"access_token":"t","token_type":"Bearer","expires_in":3600}`)
	case strings.Contains(r.Path, "/operationStatuses/"):
		f.statusReads++
		write(f.status(f.statusReads))
	case strings.Contains(r.Path, "/operationResults/"):
		f.resultReads++
		write(f.result(f.resultReads))
	case r.Method == http.MethodPut && r.Path == nsARMPath:
		f.accepted(w.Header(), f.rec.URL)
		w.WriteHeader(http.StatusAccepted) // no body
		f.namespaceReady = true
	case r.Method == http.MethodGet && r.Path == nsARMPath && !f.namespaceReady:
		write(http.StatusNotFound, `{"error":{"code":"ResourceNotFound","message":"not found"}}`)
	case r.Method == http.MethodGet && r.Path == nsARMPath:
		write(http.StatusOK, nsJSON)
	case strings.HasSuffix(r.Path, "/listKeys"):
		write(http.StatusOK, `{"primaryConnectionString":"Endpoint=sb://kyma-contract.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=k","keyName":"RootManageSharedAccessKey"}`)
	case r.Method == http.MethodPut: // the resource group
		write(http.StatusCreated, `{"name":"rg-c","location":"westeurope","properties":{"provisioningState":"Succeeded"}}`)
	default:
		write(http.StatusNotFound, `{"error":{"code":"InvalidResourceType","message":"no such path"}}`)
	}
}

func (f *fakeARM) client(t *testing.T) *eventhubs.Client {
	c, err := eventhubs.New(eventhubs.Config{ARMURL: f.rec.URL, TokenURL: f.rec.URL + "/tenant/oauth2/v2.0/token", ClientID: "keb",
		ClientSecret: "s", SubscriptionID: subscription, Timeout: 2 * time.Second, RetryInitialBackoff: time.Millisecond, RetryMaxBackoff: time.Millisecond})
	require.NoError(t, err)
	return c
}

func contractRequest() eventhubs.NamespaceRequest {
	return eventhubs.NamespaceRequest{ResourceGroup: "rg-c", Name: "kyma-contract", Region: "westeurope", Tags: map[string]string{"InstanceID": "i"}}
}

// follow calls EnsureNamespace, passing the operation back, until the namespace is there or a
// call fails; it returns the last answer.
func follow(ctx context.Context, t *testing.T, c *eventhubs.Client, req eventhubs.NamespaceRequest) (*eventhubs.Namespace, error) {
	for range 10 {
		ns, err := c.EnsureNamespace(ctx, req)
		if err != nil || ns.Operation == nil {
			return ns, err
		}
		req.Operation = ns.Operation
	}
	t.Fatal("the operation did not end")
	return nil, nil
}

// TestContract_Requests: the client's requests fit Microsoft.EventHub 2021-11-01, it takes the PUT's
// 202 Accepted with no body, and it reads exactly the operation URL ARM handed out, with the wait
// ARM asked for, while the status is not terminal (an RP-defined value too).
func TestContract_Requests(t *testing.T) {
	fx := contracttest.Load(t, "testdata/contract.json")
	f := newFakeARM(t)
	f.status = func(n int) (int, string) {
		if n == 1 {
			return http.StatusOK, `{"id":"x","name":"op-1","status":"Running","startTime":"2026-01-01T00:00:00Z"}`
		}
		return http.StatusOK, `{"id":"x","name":"op-1","status":"Succeeded"}`
	}
	c := f.client(t)
	ctx := sandboxtest.Context(t, 10*time.Second)

	ns, err := c.EnsureNamespace(ctx, contractRequest())
	require.NoError(t, err)
	require.NotNil(t, ns.Operation)
	assert.Equal(t, eventhubs.StateAccepted, ns.ProvisioningState)
	assert.Equal(t, 20*time.Second, ns.RetryAfter)
	req := contractRequest()
	req.Operation = ns.Operation
	ns, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "Running", ns.ProvisioningState, "any status but Succeeded, Failed, Canceled means running")
	require.NotNil(t, ns.Operation)
	req.Operation = ns.Operation
	ns, err = c.EnsureNamespace(ctx, req)
	require.NoError(t, err)
	assert.Nil(t, ns.Operation)
	assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
	_, err = c.ConnectionString(ctx, "rg-c", "kyma-contract")
	require.NoError(t, err)

	var ops []string
	for _, r := range f.rec.Requests() {
		switch {
		case strings.Contains(r.Path, "/operationStatuses/"):
			assert.Equal(t, opsPath+"operationStatuses/op-1", r.Path, "the URL as handed out")
			assert.Equal(t, []string{"2021-11-01"}, r.Query["api-version"], "its query as handed out")
			assert.Equal(t, http.MethodGet, r.Method)
			ops = append(ops, "status")
		case strings.Contains(r.Path, "/providers/Microsoft.EventHub/namespaces/"):
			assert.Empty(t, fx.Check(r, ""), "%s %s", r.Method, r.Path)
			assert.Equal(t, []string{eventhubs.EventHubAPIVersion}, r.Query["api-version"])
			op, _ := fx.Match(r.Method, r.Path, "")
			ops = append(ops, op.Name)
		}
	}
	assert.Equal(t, []string{"Namespaces_Get", "Namespaces_CreateOrUpdate", "status", "status", "Namespaces_Get", "Namespaces_ListKeys"}, ops)
}

// TestContract_Facts holds the client to the facts of ARM's asynchronous operations.
func TestContract_Facts(t *testing.T) {
	fx := contracttest.Load(t, "testdata/contract.json")
	fact := func(name string) any {
		v, ok := fx.Facts[name]
		require.True(t, ok, "the fixture has no fact %s", name)
		return v
	}
	ctx := sandboxtest.Context(t, 20*time.Second)

	t.Run("PUT answers", func(t *testing.T) {
		op, ok := fx.Match(http.MethodPut, nsARMPath, "")
		require.True(t, ok)
		assert.Equal(t, []int{200, 201, 202}, op.Responses, "the client takes each")
		assert.Equal(t, true, fact("namespacePutIsLongRunning"))
	})

	t.Run("Retry-After", func(t *testing.T) {
		assert.Equal(t, "seconds", fact("retryAfterUnit"))
		assert.Equal(t, time.Duration(fact("retryAfterDefaultSeconds").(float64))*time.Second, eventhubs.DefaultRetryAfter)
		assert.Equal(t, time.Duration(fact("retryAfterMaxSeconds").(float64))*time.Second, eventhubs.MaxRetryAfter)
		assert.LessOrEqual(t, eventhubs.MinRetryAfter, time.Duration(fact("retryAfterMinSeconds").(float64))*time.Second)
		assert.Equal(t, false, fact("retryAfterHttpDateSupported"))
		h := http.Header{"Retry-After": {"Wed, 21 Oct 2015 07:28:00 GMT"}}
		assert.Equal(t, eventhubs.DefaultRetryAfter, eventhubs.RetryAfter(h), "an HTTP date is no ARM Retry-After")
	})

	t.Run("terminal statuses", func(t *testing.T) {
		required := fact("asyncOperationErrorRequiredWhen").([]any)
		for _, st := range fx.Enums["TerminalStatus"] {
			f := newFakeARM(t)
			body := fmt.Sprintf(`{"status":%q}`, st)
			failing := false
			for _, r := range required {
				if r == st {
					failing = true
					body = fmt.Sprintf(`{"status":%q,"error":{"code":"QuotaExceeded","message":"no more namespaces"}}`, st)
				}
			}
			assert.Empty(t, fx.Validate(decode(t, body), "#OperationResource", st), "the fake's body fits the contract")
			f.status = func(int) (int, string) { return http.StatusOK, body }
			ns, err := follow(ctx, t, f.client(t), contractRequest())
			if !failing {
				require.NoError(t, err, st)
				assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
				continue
			}
			require.Error(t, err, st)
			assert.False(t, eventhubs.IsTemporary(err), "%s is final", st)
			assert.Contains(t, err.Error(), "Azure reports the namespace's creation "+st+": QuotaExceeded: no more namespaces")
		}
		assert.NotEmpty(t, fx.Validate(decode(t, `{"status":"Failed","error":{"code":"X"}}`), "#OperationResource", "failed"),
			"the fixture requires the message")
	})

	t.Run("a failure to read the status is not the operation's", func(t *testing.T) {
		assert.Equal(t, true, fact("statusReadFailureIsNotOperationFailure"))
		f := newFakeARM(t)
		f.status = func(n int) (int, string) {
			if n == 1 {
				return http.StatusServiceUnavailable, `{"error":{"code":"ServiceUnavailable","message":"later"}}`
			}
			return http.StatusOK, `{"status":"Succeeded"}`
		}
		c := f.client(t)
		ns, err := c.EnsureNamespace(ctx, contractRequest())
		require.NoError(t, err)
		req := contractRequest()
		req.Operation = ns.Operation
		ns, err = c.EnsureNamespace(ctx, req)
		require.NoError(t, err, "the 503 is retried")
		assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
	})

	t.Run("Location", func(t *testing.T) {
		assert.Equal(t, float64(http.StatusAccepted), fact("locationInProgressStatus"))
		assert.Equal(t, true, fact("locationDoneAnswersAsTheSynchronousCall"))
		f := newFakeARM(t)
		f.accepted = func(h http.Header, base string) {
			h.Set("Location", base+opsPath+"operationResults/op-1?api-version=2021-11-01")
		}
		f.result = func(n int) (int, string) {
			if n < 3 {
				return http.StatusAccepted, ""
			}
			return http.StatusOK, nsJSON
		}
		ns, err := follow(ctx, t, f.client(t), contractRequest())
		require.NoError(t, err)
		assert.Equal(t, eventhubs.StateSucceeded, ns.ProvisioningState)
		assert.Equal(t, 3, f.resultReads)

		f = newFakeARM(t)
		f.accepted = func(h http.Header, base string) {
			h.Set("Location", base+opsPath+"operationResults/op-1?api-version=2021-11-01")
		}
		f.result = func(int) (int, string) {
			return http.StatusBadRequest, `{"error":{"code":"InvalidSku","message":"the sku is not offered here"}}`
		}
		_, err = follow(ctx, t, f.client(t), contractRequest())
		require.Error(t, err)
		assert.False(t, eventhubs.IsTemporary(err))
		assert.Contains(t, err.Error(), "Azure reports that creating the namespace failed (InvalidSku: the sku is not offered here)")
	})

	t.Run("absolute URLs on ARM's host only", func(t *testing.T) {
		assert.Equal(t, true, fact("pollingURLsAreAbsolute"))
		assert.Equal(t, true, fact("pollingURLHostIsTheRequestsHost"))
		other := newFakeARM(t)
		for name, set := range map[string]func(http.Header, string){
			"relative":   func(h http.Header, _ string) { h.Set("Azure-AsyncOperation", opsPath+"operationStatuses/op-1") },
			"other host": func(h http.Header, _ string) { h.Set("Location", other.rec.URL+opsPath+"operationResults/op-1") },
		} {
			f := newFakeARM(t)
			f.accepted = set
			_, err := f.client(t).EnsureNamespace(ctx, contractRequest())
			require.Error(t, err, name)
			assert.False(t, eventhubs.IsTemporary(err), name)
			assert.Contains(t, err.Error(), "is not under the ARM URL", name)
		}
		assert.Empty(t, other.rec.Requests(), "no token went to another host")
	})

	t.Run("the fixture refuses what ARM refuses", func(t *testing.T) {
		bad := decode(t, `{"sku":{"name":"Standardd"},"properties":{"kafkaEnabled":"yes"}}`)
		got := fx.Validate(bad, "#EHNamespace", "put")
		assert.Contains(t, got, "put.location: required, missing")
		assert.Contains(t, got, `put.sku.name: "Standardd" is no value of enum SkuName`)
		assert.Contains(t, got, "put.properties.kafkaEnabled: want boolean, got string")
	})
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}
