package smstandin

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

const (
	instancesPath    = "/v1/service_instances"
	platformID       = "service-manager"
	maxRequestBody   = 1 << 20
	resourceInstance = "/v1/service_instances"
)

// instanceRequest is the body of POST /v1/service_instances.
type instanceRequest struct {
	Name          string              `json:"name"`
	ServicePlanID string              `json:"service_plan_id"`
	Parameters    map[string]any      `json:"parameters"`
	Labels        map[string][]string `json:"labels"`
}

// decode reads a JSON body, refusing unknown fields, and answers 400 when it cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		badRequest(w, "invalid request body: %v", err)
		return false
	}
	return true
}

// asyncParam reads the async query parameter; without it a request is synchronous.
func asyncParam(w http.ResponseWriter, r *http.Request) (async, ok bool) {
	switch v := r.URL.Query().Get("async"); v {
	case "", "false":
		return false, true
	case "true":
		return true, true
	default:
		badRequest(w, "async: invalid value %q, expected true or false", v)
		return false, false
	}
}

// listCriteria reads the fieldQuery of a list request and answers 400 when it is not supported.
func listCriteria(w http.ResponseWriter, r *http.Request, allowed ...string) ([]criterion, bool) {
	q := r.URL.Query()
	if q.Has("labelQuery") {
		badRequest(w, "labelQuery is not supported by the sandbox")
		return nil, false
	}
	crit, err := parseFieldQuery(q.Get("fieldQuery"), allowed...)
	if err != nil {
		badRequest(w, "%v", err)
		return nil, false
	}
	return crit, true
}

func (s *Server) handleListOfferings(w http.ResponseWriter, r *http.Request) {
	s.countEvents("listOfferings")
	crit, ok := listCriteria(w, r, "id", "name", "catalog_name")
	if !ok {
		return
	}
	out := List[Offering]{Items: []Offering{}}
	for _, o := range s.offerings {
		if matches(crit, map[string]string{"id": o.ID, "name": o.Name, "catalog_name": o.CatalogName}) {
			out.Items = append(out.Items, o)
		}
	}
	out.NumItems = len(out.Items)
	sandbox.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleListPlans(w http.ResponseWriter, r *http.Request) {
	s.countEvents("listPlans")
	crit, ok := listCriteria(w, r, "id", "name", "catalog_name", "service_offering_id")
	if !ok {
		return
	}
	out := List[Plan]{Items: []Plan{}}
	for _, p := range s.plans {
		if matches(crit, map[string]string{"id": p.ID, "name": p.Name, "catalog_name": p.CatalogName, "service_offering_id": p.ServiceOfferingID}) {
			out.Items = append(out.Items, p)
		}
	}
	out.NumItems = len(out.Items)
	sandbox.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) plan(id string) (Plan, bool) {
	for _, p := range s.plans {
		if p.ID == id {
			return p, true
		}
	}
	return Plan{}, false
}

func (s *Server) handleListInstances(w http.ResponseWriter, r *http.Request) {
	s.countEvents("listInstances")
	crit, ok := listCriteria(w, r, "id", "name", "service_plan_id")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	out := List[Instance]{Items: []Instance{}}
	for _, in := range selected(s.instances, crit, map[string]string{"name": lookupName}) {
		if matches(crit, map[string]string{"id": in.ID, "name": in.Name, "service_plan_id": in.ServicePlanID}) {
			out.Items = append(out.Items, in.view())
		}
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].CreatedAt.Before(out.Items[j].CreatedAt) })
	out.NumItems = len(out.Items)
	sandbox.WriteJSON(w, http.StatusOK, out)
}

func validateInstanceRequest(req *instanceRequest) string {
	switch {
	case strings.TrimSpace(req.Name) == "":
		return "name: missing"
	case len(req.Name) > 255:
		return "name: longer than 255 characters"
	case req.ServicePlanID == "":
		return "service_plan_id: missing"
	}
	for k, vals := range req.Labels {
		if strings.TrimSpace(k) == "" {
			return "labels: empty label key"
		}
		if len(vals) == 0 {
			return "labels: label " + k + " has no values"
		}
	}
	return ""
}

func (s *Server) handleCreateInstance(w http.ResponseWriter, r *http.Request) {
	s.countEvents("createInstance")
	async, ok := asyncParam(w, r)
	if !ok {
		return
	}
	var req instanceRequest
	if !decode(w, r, &req) {
		return
	}
	if msg := validateInstanceRequest(&req); msg != "" {
		badRequest(w, "%s", msg)
		return
	}
	if _, ok := s.plan(req.ServicePlanID); !ok {
		badRequest(w, "service_plan_id: plan %q not found", req.ServicePlanID)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	for _, other := range s.instances.Find(lookupName, req.Name) {
		if other.Name == req.Name {
			fail(w, http.StatusConflict, "Conflict", "found conflicting service instance: name %q is taken", req.Name)
			return
		}
	}
	now := s.opts.Now()
	in := &instance{
		Instance: Instance{ID: uuid.NewString(), Name: req.Name, ServicePlanID: req.ServicePlanID, PlatformID: platformID,
			Labels: req.Labels, CreatedAt: now, UpdatedAt: now},
		Parameters: req.Parameters,
		Calls:      map[string]int{"create": 1},
	}
	op := s.newOperation(OperationCreate, in.ID, now)
	if async && s.opts.ProvisionDelay > 0 {
		op.State, in.DoneAt = StateInProgress, now.Add(s.opts.ProvisionDelay)
	} else {
		in.Ready, in.Usable = true, true
	}
	in.LastOperation = op
	s.instances.Create(in.ID, in) // a new UUID: nothing to read
	s.putInstance(in)
	s.instanceCreatesByName.Add(in.Name, 1)
	if async {
		w.Header().Set("Location", operationPath(in.ID, op.ID))
		sandbox.WriteJSON(w, http.StatusAccepted, struct{}{})
		return
	}
	sandbox.WriteJSON(w, http.StatusCreated, in.view())
}

// newOperation is a succeeded operation on an instance, stored with it (putInstance); s.mu must
// be held.
func (s *Server) newOperation(typ, instanceID string, now time.Time) *Operation {
	op := &Operation{ID: uuid.NewString(), Type: typ, State: StateSucceeded, ResourceID: instanceID,
		ResourceType: resourceInstance, CreatedAt: now, UpdatedAt: now}
	return op
}

func operationPath(instanceID, opID string) string {
	return instancesPath + "/" + instanceID + "/operations/" + opID
}

// lookupInstance counts op and finds the instance of the path, answering 404 when it does not exist;
// s.mu must be held.
func (s *Server) lookupInstance(w http.ResponseWriter, r *http.Request, op string) (*instance, bool) {
	s.totals.Inc(op)
	s.settle()
	id := r.PathValue("id")
	in, ok := s.instance(id)
	if !ok {
		notFound(w, "service_instance", id)
		return nil, false
	}
	in.Calls[op]++
	s.instances.Put(id, in)
	return in, true
}

func (s *Server) handleGetInstance(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.lookupInstance(w, r, "getInstance")
	if !ok {
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, in.view())
}

func (s *Server) handleGetOperation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("getOperation")
	s.settle()
	id, opID := r.PathValue("id"), r.PathValue("op")
	if in, ok := s.instance(id); ok {
		in.Calls["getOperation"]++
		s.instances.Put(id, in)
	}
	op, ok := s.operations.Get(opID)
	if !ok || op.ResourceID != id {
		notFound(w, "operation", opID)
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, *op)
}

func (s *Server) handleDeleteInstance(w http.ResponseWriter, r *http.Request) {
	async, ok := asyncParam(w, r)
	if !ok {
		s.countEvents("deleteInstance")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.lookupInstance(w, r, "deleteInstance")
	if !ok {
		return
	}
	if lo := in.LastOperation; lo != nil && lo.State == StateInProgress {
		fail(w, http.StatusUnprocessableEntity, "ConcurrentOperationInProgress",
			"service instance %q has a %s operation in progress", in.ID, lo.Type)
		return
	}
	if ids := s.bindingIDs(in.ID); len(ids) > 0 {
		fail(w, http.StatusConflict, "Conflict", "service instance %q has %d binding(s); delete them first", in.ID, len(ids))
		return
	}
	now := s.opts.Now()
	op := s.newOperation(OperationDelete, in.ID, now)
	in.LastOperation, in.UpdatedAt = op, now
	if async && s.opts.ProvisionDelay > 0 {
		op.State, in.DoneAt = StateInProgress, now.Add(s.opts.ProvisionDelay)
		s.putInstance(in)
	} else {
		s.putInstance(in)
		s.instances.Delete(in.ID)
		s.instanceDeletesByName.Add(in.Name, 1)
	}
	if async {
		w.Header().Set("Location", operationPath(in.ID, op.ID))
		sandbox.WriteJSON(w, http.StatusAccepted, struct{}{})
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, struct{}{})
}
