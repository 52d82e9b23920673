package broker_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The prepared catalog is what brokerapi would encode, per region, with ETag and gzip.
func TestCatalogPrepared(t *testing.T) {
	t.Parallel()
	b := bt.Start(t, bt.Options{NoEngine: true})
	loaded, err := catalog.FromConfig(catalog.Config{})
	require.NoError(t, err)
	catalog := broker.NewCatalog(loaded)

	for _, region := range []string{"cf-eu10", "cf-eu20", "cf-eu11"} {
		want, err := json.Marshal(apiresponses.CatalogResponse{Services: catalog.Services(region)})
		require.NoError(t, err)
		path := "/oauth/" + region + "/v2/catalog"

		plain := b.Get(path, bt.WithHeader("Accept-Encoding", "identity"), bt.WithHeader("X-Broker-API-Request-Identity", "req-1"))
		requireStatus(t, http.StatusOK, plain)
		assert.JSONEq(t, string(want), string(plain.Body), region)
		assert.Equal(t, "application/json", plain.Header.Get("Content-Type"))
		assert.Equal(t, "req-1", plain.Header.Get("X-Broker-API-Request-Identity"))
		assert.Empty(t, plain.Header.Get("Content-Encoding"))
		etag := plain.Header.Get("ETag")
		require.NotEmpty(t, etag)

		zipped := b.Get(path, bt.WithHeader("Accept-Encoding", "br, gzip;q=0.8"))
		requireStatus(t, http.StatusOK, zipped)
		assert.Equal(t, "gzip", zipped.Header.Get("Content-Encoding"))
		assert.Equal(t, etag, zipped.Header.Get("ETag"))
		assert.Less(t, len(zipped.Body), len(plain.Body))
		zr, err := gzip.NewReader(bytes.NewReader(zipped.Body))
		require.NoError(t, err)
		unzipped, err := io.ReadAll(zr)
		require.NoError(t, err)
		assert.Equal(t, plain.Body, unzipped)

		refused := b.Get(path, bt.WithHeader("Accept-Encoding", "gzip;q=0"))
		assert.Empty(t, refused.Header.Get("Content-Encoding"))
		assert.Equal(t, plain.Body, refused.Body)

		for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
			r := b.Get(path, bt.WithHeader("If-None-Match", inm))
			requireStatus(t, http.StatusNotModified, r)
			assert.Empty(t, r.Body)
			assert.Equal(t, etag, r.Header.Get("ETag"))
		}
		requireStatus(t, http.StatusOK, b.Get(path, bt.WithHeader("If-None-Match", `"stale"`)))
	}
	eu10 := b.Get("/oauth/cf-eu10/v2/catalog", bt.WithHeader("Accept-Encoding", "identity"))
	eu20 := b.Get("/oauth/cf-eu20/v2/catalog", bt.WithHeader("Accept-Encoding", "identity"))
	assert.NotEqual(t, eu10.Header.Get("ETag"), eu20.Header.Get("ETag"), "regions with different catalogs have different tags")

	// The guard still runs first: no API version is 412, no credentials 401.
	requireStatus(t, http.StatusPreconditionFailed, b.Get("/v2/catalog", bt.WithHeader("X-Broker-API-Version", "")))
	requireStatus(t, http.StatusUnauthorized, b.Get("/v2/catalog", bt.WithoutAuth()))
	// Other methods are brokerapi's (405/404), not the catalog.
	assert.NotEqual(t, http.StatusOK, b.Do(http.MethodPost, "/v2/catalog", nil).Status)
}
