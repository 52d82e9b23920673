package apidoc_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"code.cloudfoundry.org/lager/v3"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"
	"github.com/pivotal-cf/brokerapi/v10"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/apidoc"
	"github.com/kyma-project/kyma-environment-broker/internal/broker"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/console"
	"github.com/kyma-project/kyma-environment-broker/internal/operator"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apidoc.Document())
	require.NoError(t, err)
	return doc
}

// TestDocumentValidates: the document is valid OpenAPI 3 (every reference resolves).
func TestDocumentValidates(t *testing.T) {
	require.NoError(t, load(t).Validate(context.Background()))
}

var param = regexp.MustCompile(`\{[^}]*\}`)

// route is "METHOD /path/{}" with parameter names dropped.
func route(method, path string) string {
	return strings.ToUpper(method) + " " + param.ReplaceAllString(path, "{}")
}

func documented(t *testing.T) []string {
	var out []string
	for path, item := range load(t).Paths.Map() {
		for method := range item.Operations() {
			out = append(out, route(method, path))
		}
	}
	sort.Strings(out)
	return out
}

// implemented are the routes the broker's handlers register: the operator API's, brokerapi's
// OSB routes, health and this package's.
func implemented(t *testing.T) []string {
	catalog, err := catalog.FromConfig(catalog.Config{})
	require.NoError(t, err)
	log := logrus.New()
	op := operator.New(storagetest.OpenSQLite(t), broker.NewCatalog(catalog), log)
	var out []string
	for _, p := range op.Routes() {
		method, path, ok := strings.Cut(p, " ")
		require.True(t, ok, "pattern %q has a method", p)
		out = append(out, route(method, path))
	}
	osb := chi.NewRouter()
	brokerapi.AttachRoutes(osb, nil, lager.NewLogger("test"))
	require.NoError(t, chi.Walk(osb, func(method, path string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, route(method, path))
		return nil
	}))
	for _, p := range []string{"/healthz", "/readyz", "/metrics", apidoc.DocumentPath, "/", console.Path + "/"} {
		out = append(out, route(http.MethodGet, p))
	}
	sort.Strings(out)
	return out
}

// TestDocumentMatchesRoutes walks the handlers' routes and the document's paths both ways:
// a route added without its description, or a description of a route that does not exist,
// fails here. Then every documented path must reach its handler through the broker's router
// under each server of the document, and every mount of the router must be documented.
func TestDocumentMatchesRoutes(t *testing.T) {
	doc, impl := documented(t), implemented(t)
	for _, r := range impl {
		assert.Contains(t, doc, r, "route %s is not in openapi.yaml", r)
	}
	for _, r := range doc {
		assert.Contains(t, impl, r, "openapi.yaml describes %s, which no handler serves", r)
	}

	b := bt.Start(t, bt.Options{NoEngine: true})
	routes, ok := b.Handler.(interface{ Routes() *mux.Router })
	require.True(t, ok, "the broker's handler is its router")
	router := routes.Routes()
	var mounts []string
	require.NoError(t, router.Walk(func(r *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := r.GetPathTemplate()
		require.NoError(t, err)
		mounts = append(mounts, tpl)
		return nil
	}))
	spec := load(t)
	var concrete []string
	for path, item := range spec.Paths.Map() {
		servers := []string{""}
		if item.Servers == nil {
			servers = []string{"", "/oauth", "/oauth/cf-eu10"} // the document's global servers
		}
		for _, s := range servers {
			concrete = append(concrete, s+param.ReplaceAllString(path, "x1"))
		}
	}
	for _, p := range concrete {
		var m mux.RouteMatch
		req := httptest.NewRequest(http.MethodGet, p, nil)
		require.True(t, router.Match(req, &m), "%s does not reach a handler", p)
		tpl, _ := m.Route.GetPathTemplate()
		if tpl == "/" {
			assert.Contains(t, []string{"/", apidoc.DocumentPath}, p, "%s falls through to Swagger UI", p)
		}
	}
	for _, mount := range mounts {
		covered := slices.ContainsFunc(concrete, func(p string) bool {
			return strings.HasPrefix(p, regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(mount, "cf-eu10"))
		})
		assert.True(t, covered, "the router mounts %s, which openapi.yaml does not describe", mount)
	}
	r := b.Get(apidoc.DocumentPath, bt.WithoutAuth())
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, apidoc.Document(), r.Body, "served without credentials")
}
