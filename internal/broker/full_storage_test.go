package broker_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is the broker's log, written by its goroutines and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// A full storage, made with SQLite's max_page_count (the database cannot grow by a page, as
// on a full disk: SQLITE_FULL), answers 503 with Retry-After and a description saying the
// storage is full, instead of 500; /readyz says so and keb_storage_full is 1; the state is
// logged once however many requests fail. With room again, the same broker recovers.
func TestAFullStorageAnswers503AndIsNotReady(t *testing.T) {
	var log lockedBuffer
	b := bt.Start(t, bt.Options{NoSandbox: true, LogOutput: &log})
	id := newID()
	b.WaitSucceeded(id, b.Provision(id, "rt-full", "ga-full"))

	w := b.Store.Database().Writer
	ctx := context.Background()
	var pages, limit int
	require.NoError(t, w.QueryRowxContext(ctx, "PRAGMA page_count").Scan(&pages))
	require.NoError(t, w.QueryRowxContext(ctx, "PRAGMA max_page_count").Scan(&limit))
	// No free pages left to reuse either: the next page a write needs is one too many.
	_, err := w.ExecContext(ctx, "VACUUM")
	require.NoError(t, err)
	require.NoError(t, w.QueryRowxContext(ctx, "PRAGMA page_count").Scan(&pages))
	_, err = w.ExecContext(ctx, "PRAGMA max_page_count = "+itoa(pages))
	require.NoError(t, err)

	for i := range 5 {
		fresh := newID()
		r := b.Put(bt.InstancePath(fresh), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-more"), bt.SAPContext("ga-more", "sa-more")))
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "request %d: %s", i, r)
		assert.Equal(t, "5", r.Header.Get("Retry-After"))
		assert.Contains(t, string(r.Body), unavailable.FullMessage)
	}
	ready := b.Get("/readyz", bt.WithoutAuth(), bt.WithoutAPIVersion())
	assert.Equal(t, http.StatusServiceUnavailable, ready.Status, ready.String())
	assert.Contains(t, string(ready.Body), "storage is full")
	assert.Equal(t, "5", ready.Header.Get("Retry-After"))
	assert.Contains(t, string(b.Get("/metrics", bt.WithoutAuth(), bt.WithoutAPIVersion()).Body), "keb_storage_full 1")
	b.Get("/readyz", bt.WithoutAuth(), bt.WithoutAPIVersion())
	assert.Equal(t, 1, log.count("storage is full: writes fail"), "logged once")
	assert.Zero(t, log.count(`"level":"error","msg":"request failed"`), "no request logged as a server failure")
	// Reads go on.
	assert.Equal(t, http.StatusOK, b.Get("/v2/service_instances/"+id).Status)

	_, err = w.ExecContext(ctx, "PRAGMA max_page_count = "+itoa(limit))
	require.NoError(t, err)
	ready = b.Get("/readyz", bt.WithoutAuth(), bt.WithoutAPIVersion())
	assert.Equal(t, http.StatusOK, ready.Status, ready.String())
	assert.Contains(t, string(b.Get("/metrics", bt.WithoutAuth(), bt.WithoutAPIVersion()).Body), "keb_storage_full 0")
	assert.Equal(t, 1, log.count("storage is writable again"))
	fresh := newID()
	b.WaitSucceeded(fresh, b.Provision(fresh, "rt-again", "ga-again"))
}

func itoa(n int) string { return strconv.Itoa(n) }
