package broker

import (
	"encoding/json"
	"fmt"

	"github.com/kyma-project/kyma-environment-broker/internal/catalog"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/pivotal-cf/brokerapi/v10/domain"
)

// PlansCatalog adapts the plans configuration to the broker and the operator endpoints.
type PlansCatalog struct {
	c        *catalog.Catalog
	services *regionCache[[]domain.Service]
}

// NewCatalog wraps a loaded plans configuration.
func NewCatalog(c *catalog.Catalog) *PlansCatalog {
	return &PlansCatalog{c: c, services: newRegionCache[[]domain.Service]()}
}

var _ Catalog = (*PlansCatalog)(nil)

// Services is the region's catalog, built once per region (a plans configuration never changes
// once loaded): brokerapi asks for it on every provisioning to check the plan, and building the
// plans' schemas took ~200 KB of allocations per call. Regions come from request paths, so at
// most maxCachedCatalogs are kept. Callers share the result and must not modify it.
func (p *PlansCatalog) Services(platformRegion string) []domain.Service {
	// Building cannot fail: the error is the cache's, for builders that can.
	s, _ := p.services.get(platformRegion, func() ([]domain.Service, error) { return p.c.Services(platformRegion), nil })
	return s
}

func (p *PlansCatalog) Plan(id string) (Plan, bool) {
	pl, ok := p.c.Plan(id)
	if !ok || !p.c.Enabled(pl.ID) {
		return Plan{}, false
	}
	return Plan{ID: pl.ID, Name: pl.Name, Trial: pl.Trial}, true
}

func (p *PlansCatalog) CanUpgrade(from, to string) bool { return p.c.CanUpgrade(from, to) }

func (p *PlansCatalog) Active(rawContext json.RawMessage) (*bool, error) {
	ctx, err := catalog.DecodeContext(rawContext)
	if err != nil {
		return nil, err
	}
	return ctx.Active, nil
}

// PlanID resolves a plan given by name or ID (operator filters).
func (p *PlansCatalog) PlanID(nameOrID string) (string, bool) {
	if pl, ok := p.c.Plan(nameOrID); ok {
		return pl.ID, true
	}
	if pl, ok := p.c.PlanByName(nameOrID); ok {
		return pl.ID, true
	}
	return "", false
}

func (p *PlansCatalog) PlanName(id string) string {
	pl, _ := p.c.Plan(id)
	return pl.Name
}

func (p *PlansCatalog) ValidateProvision(planID, platformRegion string, rawParams, rawContext json.RawMessage) (Validated, error) {
	ctx, err := catalog.ParseContext(rawContext)
	if err != nil {
		return Validated{}, err
	}
	pp, err := p.c.ValidateProvision(planID, platformRegion, rawParams, ctx)
	if err != nil {
		return Validated{}, err
	}
	params, err := convert[instance.Parameters](pp)
	if err != nil {
		return Validated{}, err
	}
	v := Validated{
		Parameters: params,
		Context:    instance.Context{Platform: ctx.Platform, GlobalAccountID: pp.GlobalAccountID, SubAccountID: pp.SubAccountID, UserID: pp.UserID},
		Provider:   pp.Provider,
	}
	if c := ctx.SMOperatorCredentials; c != nil {
		v.SMCredentials = &instance.SMCredentials{ClientID: c.ClientID, ClientSecret: c.ClientSecret, URL: c.SMURL, TokenURL: c.URL}
	}
	return v, nil
}

func (p *PlansCatalog) ValidateUpdate(planID string, current instance.Parameters, rawParams json.RawMessage) (instance.Parameters, error) {
	up, err := p.c.ValidateUpdate(planID, rawParams)
	if err != nil {
		return instance.Parameters{}, err
	}
	cur, err := convert[catalog.ProvisioningParameters](current)
	if err != nil {
		return instance.Parameters{}, err
	}
	updated, err := up.ApplyTo(cur)
	if err != nil {
		return instance.Parameters{}, err
	}
	return convert[instance.Parameters](updated)
}

// convert maps between the two parameter types, which share their JSON names.
func convert[T any](v any) (T, error) {
	var out T
	raw, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("converting parameters: %w", err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("converting parameters: %w", err)
	}
	return out, nil
}
