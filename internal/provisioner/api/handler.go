// Package api serves the Runtime Provisioner's GraphQL API (schema in
// internal/provisioner/gqlschema) over HTTP on top of a client.Client, the provisioner's service.
package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
)

// DefaultEndpoint is the default path of both the API and the playground.
const DefaultEndpoint = "/graphql"

// TenantHeader is the HTTP header carrying the tenant that scopes every call.
const TenantHeader = client.TenantHeader

// SubAccountHeader is the HTTP header with which the real provisioner's clients send the
// subaccount of a provisionRuntime; it stands for the runtime's SubAccountLabel.
const SubAccountHeader = "sub-account"

// Config is the HTTP layout of the API.
type Config struct {
	// APIEndpoint is the path of the GraphQL API (APP_API_ENDPOINT), DefaultEndpoint when empty.
	APIEndpoint string
	// PlaygroundEndpoint is the path of the GraphQL playground (APP_PLAYGROUND_API_ENDPOINT),
	// DefaultEndpoint when empty. It may equal APIEndpoint: a GET accepting text/html gets the
	// playground, anything else the API.
	PlaygroundEndpoint string
}

// NewHandler returns the HTTP handler of the GraphQL API and its playground. Resolvers call svc
// with the tenant of the request's tenant header.
func NewHandler(svc client.Client, cfg Config, log logrus.FieldLogger) http.Handler {
	if cfg.APIEndpoint == "" {
		cfg.APIEndpoint = DefaultEndpoint
	}
	if cfg.PlaygroundEndpoint == "" {
		cfg.PlaygroundEndpoint = DefaultEndpoint
	}
	log = log.WithField("component", "provisioner-api")

	schema := gqlschema.NewExecutableSchema(gqlschema.Config{Resolvers: &resolver{svc: svc}})
	gql := handler.New(schema)
	gql.AddTransport(transport.Options{})
	gql.AddTransport(transport.POST{})
	gql.Use(extension.Introspection{})
	gql.SetErrorPresenter(errorPresenter(log))
	gql.SetRecoverFunc(recoverFunc(log))

	return &server{
		cfg:        cfg,
		api:        gql,
		playground: playground.Handler("Runtime Provisioner", cfg.APIEndpoint),
	}
}

type server struct {
	cfg        Config
	api        http.Handler
	playground http.Handler
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == s.cfg.PlaygroundEndpoint && r.Method == http.MethodGet && acceptsHTML(r) {
		s.playground.ServeHTTP(w, r)
		return
	}
	if r.URL.Path != s.cfg.APIEndpoint {
		http.NotFound(w, r)
		return
	}
	ctx := withTenant(r.Context(), strings.TrimSpace(r.Header.Get(TenantHeader)))
	ctx = context.WithValue(ctx, subAccountKey{}, strings.TrimSpace(r.Header.Get(SubAccountHeader)))
	s.api.ServeHTTP(w, r.WithContext(ctx))
}

func acceptsHTML(r *http.Request) bool {
	for _, accept := range r.Header.Values("Accept") {
		if strings.Contains(accept, "text/html") {
			return true
		}
	}
	return false
}

type tenantKey struct{}

func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

type subAccountKey struct{}

// subAccountFrom returns the request's subaccount header, "" when it is missing.
func subAccountFrom(ctx context.Context) string {
	sub, _ := ctx.Value(subAccountKey{}).(string)
	return sub
}

// tenantFrom returns the tenant of the request, "" when its header is missing.
func tenantFrom(ctx context.Context) string {
	tenant, _ := ctx.Value(tenantKey{}).(string)
	return tenant
}
