package api

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/service"
)

// resolver implements the schema's resolvers by calling the provisioner's service. Errors are
// returned as they are: the error presenter turns them into GraphQL errors.
type resolver struct {
	svc client.Client
}

func (r *resolver) Mutation() gqlschema.MutationResolver { return mutationResolver{r} }
func (r *resolver) Query() gqlschema.QueryResolver       { return queryResolver{r} }

type mutationResolver struct{ *resolver }

func (r mutationResolver) ProvisionRuntime(ctx context.Context, config gqlschema.ProvisionRuntimeInput) (*gqlschema.OperationStatus, error) {
	tenant := tenantFrom(ctx)
	if tenant == "" {
		return nil, apperr.BadRequest(TenantHeader, "the %q header is required", TenantHeader)
	}
	if sub := subAccountFrom(ctx); sub != "" && config.RuntimeInput != nil {
		if _, set := config.RuntimeInput.Labels[service.SubAccountLabel]; !set {
			in := *config.RuntimeInput
			in.Labels = gqlschema.Labels{service.SubAccountLabel: sub}
			for k, v := range config.RuntimeInput.Labels {
				in.Labels[k] = v
			}
			config.RuntimeInput = &in
		}
	}
	return r.svc.ProvisionRuntime(ctx, tenant, config)
}

func (r mutationResolver) UpgradeRuntime(ctx context.Context, id string, config gqlschema.UpgradeRuntimeInput) (*gqlschema.OperationStatus, error) {
	return r.svc.UpgradeRuntime(ctx, tenantFrom(ctx), id, config)
}

func (r mutationResolver) UpgradeShoot(ctx context.Context, id string, config gqlschema.UpgradeShootInput) (*gqlschema.OperationStatus, error) {
	return r.svc.UpgradeShoot(ctx, tenantFrom(ctx), id, config)
}

func (r mutationResolver) DeprovisionRuntime(ctx context.Context, id string) (string, error) {
	return r.svc.DeprovisionRuntime(ctx, tenantFrom(ctx), id)
}

func (r mutationResolver) HibernateRuntime(ctx context.Context, id string) (*gqlschema.OperationStatus, error) {
	return r.svc.HibernateRuntime(ctx, tenantFrom(ctx), id)
}

// RollBackUpgradeOperation answers, for a runtime of the tenant, what the real provisioner has
// answered since Kyma 1.x: it is refused. Kyma upgrades keep no previous configuration to roll
// back to.
func (r mutationResolver) RollBackUpgradeOperation(ctx context.Context, id string) (*gqlschema.RuntimeStatus, error) {
	if _, err := r.svc.RuntimeConfiguration(ctx, tenantFrom(ctx), id); err != nil {
		return nil, err
	}
	return nil, apperr.NotSupported("runtime %s: rolling back an upgrade is not supported: Kyma upgrades keep no previous configuration", id)
}

func (r mutationResolver) ReconnectRuntimeAgent(ctx context.Context, id string) (string, error) {
	return r.svc.ReconnectRuntimeAgent(ctx, tenantFrom(ctx), id)
}

func (r mutationResolver) CreateRuntimeCredentials(ctx context.Context, id, name string, expirationSeconds int) (*gqlschema.RuntimeCredentials, error) {
	return r.svc.CreateRuntimeCredentials(ctx, tenantFrom(ctx), id, name, expirationSeconds)
}

func (r mutationResolver) RevokeRuntimeCredentials(ctx context.Context, id, name string) (string, error) {
	return r.svc.RevokeRuntimeCredentials(ctx, tenantFrom(ctx), id, name)
}

type queryResolver struct{ *resolver }

// RuntimeStatus answers a query that selects only the runtime's configuration (the broker's
// steps, client.RuntimeConfiguration) from the runtime alone, without reading its operations.
func (r queryResolver) RuntimeStatus(ctx context.Context, id string) (*gqlschema.RuntimeStatus, error) {
	if onlyConfiguration(ctx) {
		rc, err := r.svc.RuntimeConfiguration(ctx, tenantFrom(ctx), id)
		if err != nil {
			return nil, err
		}
		return &gqlschema.RuntimeStatus{RuntimeConfiguration: rc}, nil
	}
	return r.svc.RuntimeStatus(ctx, tenantFrom(ctx), id)
}

// onlyConfiguration reports whether the field being resolved selects runtimeConfiguration and
// nothing else (but __typename).
func onlyConfiguration(ctx context.Context) bool {
	fields := graphql.CollectFieldsCtx(ctx, nil)
	found := false
	for _, f := range fields {
		switch f.Name {
		case "runtimeConfiguration":
			found = true
		case "__typename":
		default:
			return false
		}
	}
	return found
}

func (r queryResolver) RuntimeOperationStatus(ctx context.Context, id string) (*gqlschema.OperationStatus, error) {
	return r.svc.RuntimeOperationStatus(ctx, tenantFrom(ctx), id)
}
