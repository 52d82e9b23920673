package smstandin

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// bindingRequest is the body of POST /v1/service_bindings.
type bindingRequest struct {
	Name              string         `json:"name"`
	ServiceInstanceID string         `json:"service_instance_id"`
	Parameters        map[string]any `json:"parameters"`
}

func (s *Server) handleListBindings(w http.ResponseWriter, r *http.Request) {
	s.countEvents("listBindings")
	crit, ok := listCriteria(w, r, "id", "name", "service_instance_id")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := List[Binding]{Items: []Binding{}}
	for _, b := range selected(s.bindings, crit, map[string]string{"service_instance_id": lookupInstance}) {
		if matches(crit, map[string]string{"id": b.ID, "name": b.Name, "service_instance_id": b.ServiceInstanceID}) {
			out.Items = append(out.Items, b.view())
		}
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].CreatedAt.Before(out.Items[j].CreatedAt) })
	out.NumItems = len(out.Items)
	sandbox.WriteJSON(w, http.StatusOK, out)
}

// handleCreateBinding creates bindings synchronously whatever async asks: the broker binds with
// async=false, and a synchronous answer is valid for either.
func (s *Server) handleCreateBinding(w http.ResponseWriter, r *http.Request) {
	s.countEvents("createBinding")
	if _, ok := asyncParam(w, r); !ok {
		return
	}
	var req bindingRequest
	if !decode(w, r, &req) {
		return
	}
	switch {
	case strings.TrimSpace(req.Name) == "":
		badRequest(w, "name: missing")
		return
	case req.ServiceInstanceID == "":
		badRequest(w, "service_instance_id: missing")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	in, ok := s.instance(req.ServiceInstanceID)
	if !ok {
		notFound(w, "service_instance", req.ServiceInstanceID)
		return
	}
	in.Calls["bind"]++
	s.instances.Put(in.ID, in)
	if lo := in.LastOperation; !in.Ready || lo != nil && lo.State == StateInProgress {
		why := "it is not ready"
		if lo != nil {
			why = fmt.Sprintf("its %s operation is %s", lo.Type, lo.State)
		}
		fail(w, http.StatusUnprocessableEntity, "UnprocessableEntity", "service instance %q cannot be bound: %s", in.ID, why)
		return
	}
	for _, other := range s.bindings.Find(lookupInstance, in.ID) {
		if other.Name == req.Name {
			fail(w, http.StatusConflict, "Conflict", "found conflicting service binding: name %q is taken for instance %q", req.Name, in.ID)
			return
		}
	}
	now := s.opts.Now()
	id := uuid.NewString()
	creds, err := json.Marshal(s.credentials(r, in, id))
	if err != nil {
		sandbox.WriteJSON(w, http.StatusInternalServerError, apiError{Error: "InternalError", Description: "encoding the credentials: " + err.Error()})
		return
	}
	b := &binding{
		Binding: Binding{ID: id, Name: req.Name, ServiceInstanceID: in.ID, Ready: true, CreatedAt: now, UpdatedAt: now},
		Calls:   map[string]int{"create": 1},
		creds:   creds,
	}
	s.bindings.Create(id, b) // a new UUID: nothing to read
	s.bindingCreatesByName.Inc(b.Name)
	sandbox.WriteJSON(w, http.StatusCreated, b.view())
}

func (s *Server) handleGetBinding(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lookupBinding(w, r, "getBinding")
	if !ok {
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, b.view())
}

func (s *Server) handleDeleteBinding(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lookupBinding(w, r, "deleteBinding")
	if !ok {
		return
	}
	s.bindings.Delete(b.ID)
	s.bindingDeletesByName.Inc(b.Name)
	sandbox.WriteJSON(w, http.StatusOK, struct{}{})
}

// lookupBinding counts op and finds the binding of the path, answering 404 when it does not exist;
// s.mu must be held.
func (s *Server) lookupBinding(w http.ResponseWriter, r *http.Request, op string) (*binding, bool) {
	s.totals.Inc(op)
	id := r.PathValue("id")
	b, ok := s.binding(id)
	if !ok {
		notFound(w, "service_binding", id)
		return nil, false
	}
	b.Calls[op]++
	s.bindings.Put(id, b)
	return b, true
}

// credentials are what a binding of the instance's plan holds: Service Manager credentials for the
// service-operator-access plan, pointing back at this stand-in, and Enterprise Messaging ones otherwise.
func (s *Server) credentials(r *http.Request, in *instance, bindingID string) map[string]any {
	if p, _ := s.plan(in.ServicePlanID); p.CatalogName == PlanServiceOperatorAccess {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base := scheme + "://" + r.Host + "/" + Name
		return map[string]any{"clientid": s.opts.ClientID, "clientsecret": s.opts.ClientSecret,
			"sm_url": base, "url": base, "xsappname": "sandbox-sm-" + in.ID}
	}
	short := strings.ReplaceAll(in.ID, "-", "")[:12]
	namespace, _ := in.Parameters["namespace"].(string)
	if namespace == "" {
		namespace = "default/sap.kyma/" + short
	}
	host := short + ".sandbox-em.example"
	oa2 := map[string]any{
		"clientid":      "sb-" + bindingID + "!b1|xbem",
		"clientsecret":  randomHex(16),
		"granttype":     "client_credentials",
		"tokenendpoint": "https://" + short + ".authentication.sandbox-em.example/oauth/token",
	}
	endpoint := func(broker, protocol, uri string) map[string]any {
		return map[string]any{"broker": map[string]any{"type": broker}, "oa2": deepCopy(oa2),
			"protocol": []any{protocol}, "uri": uri}
	}
	return map[string]any{
		"namespace":         namespace,
		"xsappname":         "sandbox-em-" + short,
		"serviceinstanceid": in.ID,
		"messaging": []any{
			endpoint("sapmgw", "amqp10ws", "wss://"+host+"/protocols/amqp10ws"),
			endpoint("sapmgw", "mqtt311ws", "wss://"+host+"/protocols/mqtt311ws"),
			endpoint("saprestmgw", "httprest", "https://"+host),
		},
		"management": []any{map[string]any{"oa2": deepCopy(oa2), "uri": "https://" + host + "/management"}},
	}
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
