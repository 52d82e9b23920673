package azurestandin

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

var groupName = regexp.MustCompile(`^[-\w.()]{1,90}$`)

type groupRequest struct {
	Location string            `json:"location"`
	Tags     map[string]string `json:"tags"`
}

type groupResponse struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Properties struct {
		ProvisioningState string `json:"provisioningState"`
	} `json:"properties"`
}

func (s *Server) groupJSON(g *group) groupResponse {
	out := groupResponse{ID: "/subscriptions/" + s.opts.SubscriptionID + "/resourceGroups/" + g.Name, Name: g.Name,
		Type: "Microsoft.Resources/resourceGroups", Location: g.Location, Tags: maps.Clone(g.Tags)}
	out.Properties.ProvisioningState = g.state()
	return out
}

// normalizeLocation turns "West Europe" into "westeurope", as ARM does for resource groups.
func normalizeLocation(l string) string { return strings.ToLower(strings.ReplaceAll(l, " ", "")) }

func groupNotFound(w http.ResponseWriter, name string) {
	writeError(w, http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", name)
}

// countGroup counts an authorised call on a group, on the group itself when it exists.
func (s *Server) countGroup(op, name string) *group {
	s.totals.Inc("group." + op)
	g := s.group(name)
	if g != nil {
		g.Calls[op]++
	}
	return g
}

func (s *Server) getGroup(w http.ResponseWriter, rt route) {
	g := s.countGroup("get", rt.group)
	if g == nil {
		groupNotFound(w, rt.group)
		return
	}
	sandbox.WriteJSONCharset(w, http.StatusOK, s.groupJSON(g))
}

func (s *Server) putGroup(w http.ResponseWriter, rt route, body []byte) {
	key := strings.ToLower(rt.group)
	s.groupPuts.Inc(key)
	g := s.countGroup("put", rt.group)
	var req groupRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: %v.", err)
		return
	}
	if !groupName.MatchString(rt.group) || strings.HasSuffix(rt.group, ".") {
		writeError(w, http.StatusBadRequest, "InvalidResourceGroup", "The provided resource group name '%s' is invalid: it must be 1-90 letters, digits, '-', '.', '(', ')' or '_' and must not end with '.'.", rt.group)
		return
	}
	if strings.TrimSpace(req.Location) == "" {
		writeError(w, http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
		return
	}
	if msg := validateTags(req.Tags); msg != "" {
		writeError(w, http.StatusBadRequest, "InvalidTag", "%s", msg)
		return
	}
	loc := normalizeLocation(req.Location)
	if g != nil {
		switch {
		case !g.Deleting.IsZero():
			writeError(w, http.StatusConflict, "ResourceGroupBeingDeleted", "The resource group '%s' is in deprovisioning state and cannot perform this operation.", g.Name)
		case g.Location != loc:
			writeError(w, http.StatusConflict, "InvalidResourceGroupLocation", "Invalid resource group location '%s'. The Resource group already exists in location '%s'.", loc, g.Location)
		default:
			g.Tags = maps.Clone(req.Tags)
			sandbox.WriteJSONCharset(w, http.StatusOK, s.groupJSON(g))
		}
		return
	}
	g = &group{Name: rt.group, Location: loc, Tags: maps.Clone(req.Tags), Namespaces: map[string]*namespace{},
		Calls: map[string]int{"put": 1}}
	s.groups.Put(key, g)
	s.groupCreates.Inc(key)
	sandbox.WriteJSONCharset(w, http.StatusCreated, s.groupJSON(g))
}

func (s *Server) deleteGroup(w http.ResponseWriter, rt route) {
	g := s.countGroup("delete", rt.group)
	if g == nil {
		groupNotFound(w, rt.group)
		return
	}
	if g.Deleting.IsZero() {
		g.Deleting = s.opts.Now()
		s.groupDeletes.Inc(strings.ToLower(rt.group))
	}
	w.WriteHeader(http.StatusAccepted)
}

// validateTags applies ARM's limits: at most 50 tags, names of 1-512 characters without <>%&\?/,
// values of at most 256 characters.
func validateTags(tags map[string]string) string {
	if len(tags) > 50 {
		return fmt.Sprintf("tags: %d tags exceed the limit of 50.", len(tags))
	}
	for k, v := range tags {
		switch {
		case k == "" || len(k) > 512 || strings.ContainsAny(k, `<>%&\?/`):
			return fmt.Sprintf("tags: the tag name '%s' is invalid: it must have 1-512 characters and none of <>%%&\\?/.", k)
		case len(v) > 256:
			return fmt.Sprintf("tags: the value of tag '%s' is longer than 256 characters.", k)
		}
	}
	return ""
}
