package servicemanager

// The request and response bodies of the Service Manager API v1, as far as the client reads them.

// listJSON is a list answer; the client's queries select a few objects, well within one page.
type listJSON[T any] struct {
	NumItems int `json:"num_items"`
	Items    []T `json:"items"`
}

type offeringJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	CatalogName string `json:"catalog_name"`
}

type planJSON struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	CatalogName       string `json:"catalog_name"`
	ServiceOfferingID string `json:"service_offering_id"`
}

type instanceRequestJSON struct {
	Name          string              `json:"name"`
	ServicePlanID string              `json:"service_plan_id"`
	Parameters    map[string]any      `json:"parameters,omitempty"`
	Labels        map[string][]string `json:"labels,omitempty"`
}

type operationJSON struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	State       string `json:"state"`
	Description string `json:"description"`
}

type instanceJSON struct {
	ID            string         `json:"id"`
	Name          string         `json:"name"`
	ServicePlanID string         `json:"service_plan_id"`
	Ready         bool           `json:"ready"`
	LastOperation *operationJSON `json:"last_operation"`
}

func (in instanceJSON) instance() *Instance {
	out := &Instance{ID: in.ID, Name: in.Name, ServicePlanID: in.ServicePlanID, Ready: in.Ready}
	if lo := in.LastOperation; lo != nil {
		out.LastOperation = &LastOperation{ID: lo.ID, Type: lo.Type, State: lo.State, Description: lo.Description}
	}
	return out
}

type bindingRequestJSON struct {
	Name              string         `json:"name"`
	ServiceInstanceID string         `json:"service_instance_id"`
	Parameters        map[string]any `json:"parameters,omitempty"`
}

type bindingJSON struct {
	ID                string         `json:"id"`
	Name              string         `json:"name"`
	ServiceInstanceID string         `json:"service_instance_id"`
	Credentials       map[string]any `json:"credentials"`
}

func (b bindingJSON) binding() *Binding {
	return &Binding{ID: b.ID, Name: b.Name, InstanceID: b.ServiceInstanceID, Credentials: b.Credentials}
}
