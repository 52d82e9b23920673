package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
)

func TestGraphQLSendsTheTenant(t *testing.T) {
	tenants := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenants <- r.Header.Get(client.TenantHeader)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":{"result":"op-1"}}`))
	}))
	defer srv.Close()
	c := client.NewGraphQL(srv.URL, srv.Client())

	id, err := c.DeprovisionRuntime(context.Background(), "tenant-1", "rt-1")

	require.NoError(t, err)
	assert.Equal(t, "op-1", id)
	assert.Equal(t, "tenant-1", <-tenants)
}

func TestGraphQLErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		body   string
		check  func(t *testing.T, err error)
	}{
		"API error": {
			status: http.StatusOK,
			body:   `{"data":null,"errors":[{"message":"x: y","path":["deprovisionRuntime"],"extensions":{"code":"BAD_REQUEST","reason":"y","field":"x"}}]}`,
			check: func(t *testing.T, err error) {
				assert.Equal(t, &apperr.Error{Code: apperr.CodeBadRequest, Field: "x", Reason: "y"}, err)
			},
		},
		"request error with a 4xx status": {
			status: http.StatusUnprocessableEntity,
			body:   `{"errors":[{"message":"unparsable","extensions":{"code":"BAD_REQUEST","reason":"unparsable"}}]}`,
			check: func(t *testing.T, err error) {
				assert.Equal(t, &apperr.Error{Code: apperr.CodeBadRequest, Reason: "unparsable"}, err)
			},
		},
		"error without code": {
			status: http.StatusOK,
			body:   `{"errors":[{"message":"something broke"}]}`,
			check: func(t *testing.T, err error) {
				assert.Equal(t, &apperr.Error{Code: apperr.CodeInternal, Reason: "something broke"}, err)
			},
		},
		"no GraphQL response": {
			status: http.StatusBadGateway,
			body:   `<html>bad gateway</html>`,
			check: func(t *testing.T, err error) {
				assert.Equal(t, apperr.CodeInternal, apperr.CodeOf(err))
				assert.ErrorContains(t, err, "while deprovisioning runtime rt-1")
				assert.ErrorContains(t, err, "HTTP 502")
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()

			_, err := client.NewGraphQL(srv.URL, srv.Client()).DeprovisionRuntime(context.Background(), "t", "rt-1")

			require.Error(t, err)
			tc.check(t, err)
		})
	}
}

func TestGraphQLTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()

	_, err := client.NewGraphQL(url, nil).RuntimeStatus(context.Background(), "t", "rt-1")

	require.Error(t, err)
	assert.ErrorContains(t, err, "while getting the status of runtime rt-1")
	assert.Equal(t, apperr.CodeInternal, apperr.CodeOf(err))
}
