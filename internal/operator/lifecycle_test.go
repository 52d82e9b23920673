package operator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func putTrial(t *testing.T, b *bt.Broker, ga string) (string, string) {
	t.Helper()
	id := uuid.NewString()
	r := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.TrialPlanID, map[string]any{"name": "trial"}, bt.SAPContext(ga, "sa-"+ga)))
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	return id, r.Operation()
}

func expirePath(id string) string { return "/expire/service_instance/" + id }

// TestExpireEndpoint: an operator expires a trial: its runtime is removed by a suspension,
// expired_at is set, a repeat changes nothing.
func TestExpireEndpoint(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id, op := putTrial(t, b, "ga-exp")
	b.WaitSucceeded(id, op)
	r := b.Put(expirePath(id), nil)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	var out runtime.Expired
	r.JSON(t, &out)
	assert.Equal(t, id, out.InstanceID)
	require.NotEmpty(t, out.OperationID)
	assert.False(t, out.ExpiredAt.IsZero())
	b.WaitSucceeded(id, out.OperationID)
	assert.Equal(t, "suspension", b.Operations(id)[0].Type)

	r = b.Put(expirePath(id), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	var again runtime.Expired
	r.JSON(t, &again)
	assert.True(t, again.AlreadyExpired)
	assert.True(t, out.ExpiredAt.Equal(again.ExpiredAt), "the first expiry time stays")
	assert.Len(t, b.Operations(id), 2, "no second suspension")

	p := b.Get("/runtimes?instance_id=" + id)
	var page runtime.Page
	p.JSON(t, &page)
	require.Len(t, page.Data, 1)
	assert.Equal(t, "suspended", page.Data[0].Status.State)
	require.NotNil(t, page.Data[0].Status.Suspension)
	assert.NotNil(t, page.Data[0].ExpiredAt)
	r = b.Get("/kubeconfig/" + id)
	assert.Equal(t, http.StatusConflict, r.Status, "an expired instance has no runtime: %s", r)
}

// TestExpireHostile: bad IDs, plans that do not expire, busy instances, bodies, methods,
// credentials, and a race of twenty operators expiring the same instance: one suspension.
func TestExpireHostile(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	busy, _ := putTrial(t, b, "ga-busy")
	r := b.Put(expirePath(busy), nil)
	assert.Equal(t, http.StatusConflict, r.Status, "provisioning: %s", r)
	assert.Contains(t, r.Description(), "provision")

	r = b.Put(bt.InstancePath("aws-1"), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("aws"), bt.SAPContext("ga-aws", "sa")))
	require.Equal(t, http.StatusAccepted, r.Status)
	b.FinishOperation(r.Operation(), storage.StateSucceeded)
	r = b.Put(expirePath("aws-1"), nil)
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r)
	assert.Contains(t, r.Description(), "trial")

	for path, want := range map[string]int{
		expirePath(uuid.NewString()):         http.StatusNotFound,
		expirePath("%01"):                    http.StatusBadRequest,
		expirePath(strings.Repeat("a", 300)): http.StatusBadRequest,
		"/expire/service_instance/":          http.StatusNotFound,
		"/expire/service_instance/a/b":       http.StatusNotFound,
		"/expire/service_instances/" + busy:  http.StatusNotFound,
		"/kubeconfig/" + uuid.NewString():    http.StatusNotFound,
		"/kubeconfig/" + busy:                http.StatusConflict,
		"/kubeconfig/%7f":                    http.StatusBadRequest,
		"/info/runtimes?plan=aws":            http.StatusBadRequest,
		"/info/nothing":                      http.StatusNotFound,
	} {
		method := http.MethodPut
		if !strings.HasPrefix(path, "/expire") {
			method = http.MethodGet
		}
		r := b.Do(method, path, nil)
		assert.Equal(t, want, r.Status, "%s %s: %s", method, path, r)
		if want == http.StatusBadRequest {
			assert.NotEmpty(t, r.Description(), path)
		}
	}
	r = b.Do(http.MethodGet, expirePath(busy), nil)
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status, "%s", r)
	r = b.Put(expirePath(busy), nil, bt.WithoutAuth())
	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r)
	r = b.Get("/kubeconfig/"+busy, bt.WithBasicAuth("broker", "wrong"))
	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r)
	r = b.Put(expirePath(busy), map[string]any{"force": true})
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r)
	req := bt.NewRequest(t, http.MethodPut, b.URL+expirePath(busy), nil)
	req.Body = io.NopCloser(bytes.NewReader(make([]byte, 4<<20)))
	req.ContentLength = 4 << 20
	resp, err := b.Client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, resp.StatusCode)

	// The race: the provisioning finishes, twenty operators expire at once.
	op := b.Operations(busy)[0]
	b.FinishOperation(op.ID, storage.StateSucceeded)
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- b.Put(expirePath(busy), nil).Status
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	assert.Equal(t, 1, count[http.StatusAccepted], "%v", count)
	assert.Equal(t, 19, count[http.StatusConflict]+count[http.StatusOK], "the others see the suspension running: %v", count)
	suspensions := 0
	for _, op := range b.Operations(busy) {
		if op.Type == "suspension" {
			suspensions++
		}
	}
	assert.Equal(t, 1, suspensions)
}

// TestKubeconfigAndInfo: the runtime's kubeconfig once it is provisioned; counts per plan,
// region and state; op_detail and the provisioner's configurations in GET /runtimes.
func TestKubeconfigAndInfo(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{})
	id := uuid.NewString()
	b.WaitSucceeded(id, b.Provision(id, "kc", "ga-kc"))
	trial, op := putTrial(t, b, "ga-kc2")
	b.WaitSucceeded(trial, op)

	r := b.Get("/kubeconfig/" + id)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	assert.Equal(t, "application/x-yaml", r.Header.Get("Content-Type"))
	assert.Contains(t, string(r.Body), "apiVersion")
	assert.Contains(t, string(r.Body), "clusters")

	r = b.Get("/info/runtimes")
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	var c runtime.Counts
	r.JSON(t, &c)
	assert.Equal(t, 2, c.Total)
	assert.Equal(t, map[string]int{"aws": 1, "trial": 1}, c.Plans)
	assert.Equal(t, map[string]int{"provisioned": 2}, c.States)
	regions := 0
	for _, n := range c.Regions {
		regions += n
	}
	assert.Equal(t, 2, regions)
	assert.NotEmpty(t, c.Rows)

	var page runtime.Page
	r = b.Get("/runtimes?instance_id=" + id + "&op_detail=all&kyma_config=true&cluster_config=true")
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	r.JSON(t, &page)
	require.Len(t, page.Data, 1)
	d := page.Data[0]
	require.Len(t, d.Status.Operations, 1)
	assert.Equal(t, "provision", d.Status.Operations[0].Type)
	assert.Empty(t, d.ConfigError)
	assert.NotEmpty(t, d.KymaConfig)
	assert.NotEmpty(t, d.ClusterConfig)
	page = runtime.Page{}
	r = b.Get("/runtimes?instance_id=" + id)
	r.JSON(t, &page)
	assert.Empty(t, page.Data[0].Status.Operations, "op_detail=last is the default")
	assert.Empty(t, page.Data[0].KymaConfig)

	// The shoot filter matches the cluster name the provisioning recorded.
	shoot := ""
	for _, op := range b.Operations(id) {
		var data struct {
			ShootName string `json:"shoot_name"`
		}
		require.NoError(t, json.Unmarshal(op.Data, &data))
		shoot = data.ShootName
	}
	require.NotEmpty(t, shoot)
	r = b.Get("/runtimes?shoot=" + shoot)
	page = runtime.Page{}
	r.JSON(t, &page)
	require.Len(t, page.Data, 1)
	assert.Equal(t, id, page.Data[0].InstanceID)
}
