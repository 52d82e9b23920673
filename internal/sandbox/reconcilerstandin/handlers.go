package reconcilerstandin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// maxBody bounds a request body; kubeconfigs are a few kilobytes.
const maxBody = 4 << 20

// apiError is the mothership's error body.
type apiError struct {
	Error string `json:"error"`
}

func validate(c *Cluster) string {
	var missing []string
	if strings.TrimSpace(c.RuntimeID) == "" {
		missing = append(missing, "runtimeID is required")
	}
	if strings.TrimSpace(c.Kubeconfig) == "" {
		missing = append(missing, "kubeconfig is required")
	}
	if strings.TrimSpace(c.KymaConfig.Version) == "" {
		missing = append(missing, "kymaConfig.version is required")
	}
	if len(c.KymaConfig.Components) == 0 {
		missing = append(missing, "kymaConfig.components must not be empty")
	}
	for i, comp := range c.KymaConfig.Components {
		if strings.TrimSpace(comp.Component) == "" {
			missing = append(missing, fmt.Sprintf("kymaConfig.components[%d].component is required", i))
		}
		for j, cfg := range comp.Configuration {
			if cfg.Key == "" {
				missing = append(missing, fmt.Sprintf("kymaConfig.components[%d].configuration[%d].key is required", i, j))
			}
		}
	}
	return strings.Join(missing, "; ")
}

func (s *Server) isFailing(c *Cluster) bool {
	for _, comp := range c.KymaConfig.Components {
		if s.failing[comp.Component] {
			return true
		}
	}
	return false
}

// handleApply serves POST (create or replace) and PUT (update, 404 for an unknown cluster).
func (s *Server) handleApply(update bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Cluster
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.UseNumber() // keep configuration numbers exact, so equal configurations compare equal
		err := dec.Decode(&req)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.totals.Inc("apply")
		if err != nil {
			s.totals.Inc("apply.invalid")
			sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Error: "invalid JSON: " + err.Error()})
			return
		}
		if msg := validate(&req); msg != "" {
			s.totals.Inc("apply.invalid")
			sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Error: msg})
			return
		}
		c, ok := s.cluster(req.RuntimeID)
		if !ok {
			if update {
				sandbox.WriteJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("cluster %q not found", req.RuntimeID)})
				return
			}
			c = &cluster{Calls: map[string]int{}}
		}
		c.Calls["apply"]++
		s.clusters.Put(req.RuntimeID, c)
		c.apply(req, s.isFailing(&req), s.opts.Now())
		sandbox.WriteJSON(w, http.StatusOK, s.state(r, req.RuntimeID, c))
	}
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("status")
	id := r.PathValue("runtimeID")
	c, ok := s.cluster(id)
	if !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("cluster %q not found", id)})
		return
	}
	c.Calls["status"]++
	s.clusters.Put(id, c)
	sandbox.WriteJSON(w, http.StatusOK, s.state(r, id, c))
}

// handleDelete starts the deletion; asking again while it runs or after it ended changes nothing.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("delete")
	id := r.PathValue("runtimeID")
	c, ok := s.cluster(id)
	if !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("cluster %q not found", id)})
		return
	}
	c.Calls["delete"]++
	s.clusters.Put(id, c)
	if c.DeleteAt.IsZero() {
		c.DeleteAt = s.opts.Now()
	}
	sandbox.WriteJSON(w, http.StatusOK, s.state(r, id, c))
}

func (s *Server) state(r *http.Request, id string, c *cluster) State {
	return State{
		Cluster:              id,
		ClusterVersion:       c.ClusterVer,
		ConfigurationVersion: c.ConfigVer,
		Status:               c.status(s.opts.Now(), s.opts.ReconcileTime, s.opts.DeleteTime),
		StatusURL:            statusURL(r, id),
	}
}

// statusURL is the absolute URL of the cluster's status endpoint as the caller reaches it, with the
// sandbox's path prefix, which the request still carries in RequestURI.
func statusURL(r *http.Request, id string) string {
	prefix := ""
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && strings.HasSuffix(u.Path, r.URL.Path) {
		prefix = strings.TrimSuffix(u.Path, r.URL.Path)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + prefix + "/v1/clusters/" + url.PathEscape(id) + "/status"
}
