package reconcilerstandin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// wireCluster is what the contract check reads of a request: the presence of the fields the
// API requires of a component, and the JSON type of configuration values.
type wireCluster struct {
	KymaConfig *struct {
		Components *[]struct {
			URL           *string `json:"URL"`
			Version       *string `json:"version"`
			Configuration *[]struct {
				Value json.RawMessage `json:"value"`
			} `json:"configuration"`
		} `json:"components"`
		Administrators *[]string `json:"administrators"`
	} `json:"kymaConfig"`
}

// checkContract refuses what the mothership's OpenAPI (schemas component and configuration)
// refuses: a component without URL or version, an URL that is not absolute, a configuration
// value that is not a string, boolean or number.
func checkContract(body []byte) error {
	var w wireCluster
	if err := json.Unmarshal(body, &w); err != nil {
		return err
	}
	if w.KymaConfig == nil || w.KymaConfig.Components == nil {
		return errors.New("kymaConfig.components is required")
	}
	if w.KymaConfig.Administrators == nil {
		return errors.New("kymaConfig.administrators is required")
	}
	var bad []string
	for i, c := range *w.KymaConfig.Components {
		switch {
		case c.URL == nil:
			bad = append(bad, fmt.Sprintf("kymaConfig.components[%d].URL is required", i))
		case *c.URL != "":
			if u, err := url.Parse(*c.URL); err != nil || !u.IsAbs() {
				bad = append(bad, fmt.Sprintf("kymaConfig.components[%d].URL must be an absolute URI", i))
			}
		}
		if c.Version == nil || strings.TrimSpace(*c.Version) == "" {
			bad = append(bad, fmt.Sprintf("kymaConfig.components[%d].version is required", i))
		}
		if c.Configuration == nil {
			bad = append(bad, fmt.Sprintf("kymaConfig.components[%d].configuration is required", i))
			continue
		}
		for j, cfg := range *c.Configuration {
			v := bytes.TrimSpace(cfg.Value)
			if len(v) == 0 || v[0] == '{' || v[0] == '[' || string(v) == "null" {
				bad = append(bad, fmt.Sprintf("kymaConfig.components[%d].configuration[%d].value must be a string, boolean or number", i, j))
			}
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// has tells whether c contains a component of names.
func (s *Server) has(c *Cluster, names map[string]bool) bool {
	for _, comp := range c.KymaConfig.Components {
		if names[comp.Component] {
			return true
		}
	}
	return false
}

// handleApply serves POST (create or replace) and PUT (update, 404 for an unknown cluster).
func (s *Server) handleApply(update bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Cluster
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber() // keep configuration numbers exact, so equal configurations compare equal
			err = dec.Decode(&req)
		}
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
		if err := checkContract(body); err != nil {
			s.totals.Inc("apply.invalid")
			sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
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
		c.apply(req, s.has(&req, s.failing), s.has(&req, s.retryable), s.opts.Now())
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
