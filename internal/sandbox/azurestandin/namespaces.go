package azurestandin

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

var namespaceName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]{4,48}[a-zA-Z0-9]$`)

// maxCapacity is the largest sku.capacity per sku (throughput or processing units).
var maxCapacity = map[string]int{"Basic": 40, "Standard": 40, "Premium": 16}

type namespaceRequest struct {
	Location   string `json:"location"`
	Sku        *Sku   `json:"sku"`
	Properties struct {
		KafkaEnabled *bool `json:"kafkaEnabled"`
	} `json:"properties"`
	Tags map[string]string `json:"tags"`
}

type namespaceResponse struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Sku        Sku               `json:"sku"`
	Properties struct {
		ProvisioningState  string    `json:"provisioningState"`
		Status             string    `json:"status"`
		KafkaEnabled       bool      `json:"kafkaEnabled"`
		ServiceBusEndpoint string    `json:"serviceBusEndpoint"`
		MetricID           string    `json:"metricId"`
		CreatedAt          time.Time `json:"createdAt"`
		UpdatedAt          time.Time `json:"updatedAt"`
	} `json:"properties"`
}

type keysResponse struct {
	PrimaryConnectionString   string `json:"primaryConnectionString"`
	SecondaryConnectionString string `json:"secondaryConnectionString"`
	PrimaryKey                string `json:"primaryKey"`
	SecondaryKey              string `json:"secondaryKey"`
	KeyName                   string `json:"keyName"`
}

func (s *Server) namespaceJSON(g *group, ns *namespace) namespaceResponse {
	out := namespaceResponse{
		ID:       "/subscriptions/" + s.opts.SubscriptionID + "/resourceGroups/" + g.Name + "/providers/Microsoft.EventHub/namespaces/" + ns.Name,
		Name:     ns.Name,
		Type:     "Microsoft.EventHub/Namespaces",
		Location: ns.Location,
		Tags:     maps.Clone(ns.Tags),
		Sku:      ns.Sku,
	}
	p := &out.Properties
	p.ProvisioningState = s.namespaceState(g, ns)
	p.Status = map[string]string{StateSucceeded: "Active", StateActivating: "Activating", StateDeleting: "Removing"}[p.ProvisioningState]
	p.KafkaEnabled = ns.Kafka
	p.ServiceBusEndpoint = "https://" + ns.Name + ".servicebus.windows.net:443/"
	p.MetricID = s.opts.SubscriptionID + ":" + strings.ToLower(ns.Name)
	p.CreatedAt, p.UpdatedAt = ns.Created, ns.Updated
	return out
}

// lookupNamespace counts an authorised call and finds the group and the namespace, answering 404
// when either is missing.
func (s *Server) lookupNamespace(w http.ResponseWriter, rt route, op string) (*group, *namespace, bool) {
	s.totals.Inc("namespace." + op)
	g := s.group(rt.group)
	if g == nil {
		groupNotFound(w, rt.group)
		return nil, nil, false
	}
	ns := g.Namespaces[strings.ToLower(rt.namespace)]
	if ns == nil || ns.hidden() {
		writeError(w, http.StatusNotFound, "ResourceNotFound", "The Resource 'Microsoft.EventHub/namespaces/%s' under resource group '%s' was not found.", rt.namespace, rt.group)
		return g, nil, false
	}
	ns.Calls[op]++
	return g, ns, true
}

func (s *Server) getNamespace(w http.ResponseWriter, rt route) {
	g, ns, ok := s.lookupNamespace(w, rt, "get")
	if !ok {
		return
	}
	sandbox.WriteJSONCharset(w, http.StatusOK, s.namespaceJSON(g, ns))
}

// hidden tells that a namespace is not visible: ARM shows a resource whose creation it answered
// 202 Accepted only once the operation succeeded.
func (ns *namespace) hidden() bool { return ns.Op != nil && (ns.Op.running() || ns.Op.Fail) }

func (s *Server) putNamespace(w http.ResponseWriter, rt route, body []byte, base string) {
	key := strings.ToLower(rt.namespace)
	s.namespacePuts.Inc(key)
	s.totals.Inc("namespace.put")
	g := s.group(rt.group)
	if g == nil {
		groupNotFound(w, rt.group)
		return
	}
	existing := g.Namespaces[key]
	if existing != nil {
		existing.Calls["put"]++
	}
	if !g.Deleting.IsZero() {
		writeError(w, http.StatusConflict, "ResourceGroupBeingDeleted", "The resource group '%s' is in deprovisioning state and cannot perform this operation.", g.Name)
		return
	}
	if existing != nil && existing.Op.running() {
		writeError(w, http.StatusConflict, "Conflict", "Namespace '%s': another operation (%s) is in progress; retry when it is over.", existing.Name, existing.Op.ID)
		return
	}
	if existing != nil && existing.hidden() {
		existing = nil // its creation failed: this PUT creates it anew
	}
	var req namespaceRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: %v.", err)
		return
	}
	sku, kafka, msg := validateNamespace(rt.namespace, &req)
	if msg != "" {
		writeError(w, http.StatusBadRequest, "BadRequest", "%s", msg)
		return
	}
	if og, _ := s.findNamespace(rt.namespace); og != nil && !strings.EqualFold(og.Name, g.Name) {
		writeError(w, http.StatusBadRequest, "BadRequest", "The specified name is not available: namespace '%s' exists in another resource group.", rt.namespace)
		return
	}
	now := s.opts.Now()
	if existing != nil {
		existing.Tags, existing.Sku, existing.Kafka, existing.Updated = maps.Clone(req.Tags), sku, kafka, now
		sandbox.WriteJSONCharset(w, http.StatusOK, s.namespaceJSON(g, existing))
		return
	}
	ns := &namespace{Name: rt.namespace, Location: req.Location, Tags: maps.Clone(req.Tags), Sku: sku, Kafka: kafka,
		Created: now, Updated: now, Primary: randomKey(), Secondary: randomKey(), Calls: map[string]int{"put": 1}}
	g.Namespaces[key] = ns
	s.namespaceCreates.Inc(key)
	if s.longRunning(rt.namespace) {
		ns.Op = &asyncOp{ID: newOperationID(), Started: now, Fail: s.opts.LongRunning == LongRunningFail}
		s.accept(w, base, ns)
		return
	}
	sandbox.WriteJSONCharset(w, http.StatusCreated, s.namespaceJSON(g, ns))
}

// validateNamespace checks the name and body of a namespace PUT and returns the sku and Kafka
// setting to store, or a message naming the offending field.
func validateNamespace(name string, req *namespaceRequest) (Sku, bool, string) {
	if !namespaceName.MatchString(name) {
		return Sku{}, false, fmt.Sprintf("The specified service namespace is invalid: name '%s' must have 6-50 letters, digits or hyphens, start with a letter and end with a letter or digit.", name)
	}
	if strings.TrimSpace(req.Location) == "" {
		return Sku{}, false, "location is required."
	}
	if req.Sku == nil || req.Sku.Name == "" {
		return Sku{}, false, "sku.name is required."
	}
	sku := *req.Sku
	for n := range maxCapacity {
		if strings.EqualFold(sku.Name, n) {
			sku.Name = n
		}
	}
	limit, ok := maxCapacity[sku.Name]
	switch {
	case !ok:
		return Sku{}, false, fmt.Sprintf("sku.name '%s' is not one of Basic, Standard, Premium.", req.Sku.Name)
	case sku.Tier != "" && !strings.EqualFold(sku.Tier, sku.Name):
		return Sku{}, false, fmt.Sprintf("sku.tier '%s' does not match sku.name '%s'.", sku.Tier, sku.Name)
	case sku.Capacity < 0 || sku.Capacity > limit:
		return Sku{}, false, fmt.Sprintf("sku.capacity %d is out of the range 1-%d of the %s tier.", sku.Capacity, limit, sku.Name)
	}
	sku.Tier = sku.Name
	if sku.Capacity == 0 {
		sku.Capacity = 1
	}
	kafka := sku.Name != "Basic" // the default of the Standard and Premium tiers
	if k := req.Properties.KafkaEnabled; k != nil {
		kafka = *k
	}
	if kafka && sku.Name == "Basic" {
		return Sku{}, false, "properties.kafkaEnabled: Kafka is not supported in the Basic tier."
	}
	if msg := validateTags(req.Tags); msg != "" {
		return Sku{}, false, msg
	}
	return sku, kafka, ""
}

func (s *Server) listKeys(w http.ResponseWriter, rt route) {
	g, ns, ok := s.lookupNamespace(w, rt, "listKeys")
	if !ok {
		return
	}
	if !strings.EqualFold(rt.rule, RootRule) {
		writeError(w, http.StatusNotFound, "NotFound", "The authorization rule '%s' was not found in namespace '%s'.", rt.rule, ns.Name)
		return
	}
	if state := s.namespaceState(g, ns); state != StateSucceeded {
		writeError(w, http.StatusConflict, "Conflict", "Namespace '%s' is %s; its keys can be listed once its provisioningState is Succeeded.", ns.Name, state)
		return
	}
	conn := func(key string) string {
		return "Endpoint=sb://" + ns.Name + ".servicebus.windows.net/;SharedAccessKeyName=" + RootRule + ";SharedAccessKey=" + key
	}
	sandbox.WriteJSONCharset(w, http.StatusOK, keysResponse{PrimaryConnectionString: conn(ns.Primary), SecondaryConnectionString: conn(ns.Secondary),
		PrimaryKey: ns.Primary, SecondaryKey: ns.Secondary, KeyName: RootRule})
}
