package directorstandin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/gql"
)

// Applications are registered, changed and assigned to runtimes through the admin endpoints
// (tests and the walkthrough play the Compass cockpit there); a runtime's Runtime Agent lists the
// ones assigned to it with applicationsForRuntime over mutual TLS. Each bundle of an assigned
// application has credentials of its own for each runtime it is assigned to.

// Bundle auth types: basic credentials or OAuth client credentials.
const (
	AuthBasic = "basic"
	AuthOAuth = "oauth"
)

// Bundle is a bundle (package) of an application's APIs.
type Bundle struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Auth is AuthBasic (the default) or AuthOAuth, whose credentials carry OAuthURL.
	Auth     string `json:"auth,omitempty"`
	OAuthURL string `json:"oauthURL,omitempty"`
}

// Application is an application as the admin endpoints and the inspection snapshot show it.
type Application struct {
	ID           string         `json:"id"`
	Tenant       string         `json:"tenant"`
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	ProviderName string         `json:"providerName,omitempty"`
	Labels       map[string]any `json:"labels"`
	Bundles      []Bundle       `json:"bundles"`
	// Runtimes are the IDs of the runtimes the application is assigned to, sorted.
	Runtimes []string `json:"runtimes"`
}

// application is an application as its row holds it: Credentials are by runtime ID, then bundle ID.
type application struct {
	Seq         int64                                `json:"seq"`
	App         Application                          `json:"app"`
	Credentials map[string]map[string]map[string]any `json:"credentials"`
	// Tokens are the application's one-time tokens (requestOneTimeTokenForApplication): their
	// system auths and, by auth ID, the SHA-256 of each token.
	Tokens      []SystemAuth      `json:"tokens,omitempty"`
	TokenHashes map[string]string `json:"tokenHashes,omitempty"`
}

// ApplicationInput registers or changes an application; bundles are matched by name, so a
// changed application keeps the IDs and credentials of the bundles it keeps.
type ApplicationInput struct {
	Tenant       string         `json:"tenant"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	ProviderName string         `json:"providerName"`
	Labels       map[string]any `json:"labels"`
	Bundles      []Bundle       `json:"bundles"`
}

func (s *StandIn) encodeApplication(id string) (any, bool) {
	a, ok := s.apps[id]
	if !ok {
		return nil, false
	}
	return a, true
}

func (s *StandIn) restoreApplications(rows durable.Rows) error {
	s.apps = map[string]*application{}
	return durable.EachExact(rows, kindApplication, func(id string, a application) {
		if a.Credentials == nil {
			a.Credentials = map[string]map[string]map[string]any{}
		}
		if a.App.Labels == nil {
			a.App.Labels = map[string]any{}
		}
		s.apps[id] = &a
	})
}

// Applications returns every application, in registration order.
func (s *StandIn) Applications() []Application {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Application{}
	for _, a := range s.sortedApps() {
		out = append(out, a.view())
	}
	return out
}

func (s *StandIn) sortedApps() []*application {
	out := make([]*application, 0, len(s.apps))
	for _, a := range s.apps {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

func (a *application) view() Application {
	v := a.App
	v.Labels = cloneLabels(a.App.Labels)
	v.Bundles = append([]Bundle{}, a.App.Bundles...)
	v.Runtimes = make([]string, 0, len(a.Credentials))
	for rt := range a.Credentials {
		v.Runtimes = append(v.Runtimes, rt)
	}
	sort.Strings(v.Runtimes)
	return v
}

// credentials are new credentials of a bundle for one runtime.
func credentials(b Bundle) map[string]any {
	if b.Auth == AuthOAuth {
		return map[string]any{"oauth": map[string]any{"clientId": uuid.NewString(), "clientSecret": newToken(), "url": b.OAuthURL}}
	}
	return map[string]any{"basic": map[string]any{"username": "sandbox-" + newToken()[:12], "password": newToken()}}
}

// check validates the input against the applications of its tenant, other than self.
func (s *StandIn) check(in *ApplicationInput, self string) error {
	in.Tenant = strings.TrimSpace(in.Tenant)
	switch {
	case in.Tenant == "":
		return fmt.Errorf("tenant is required")
	case strings.TrimSpace(in.Name) == "":
		return fmt.Errorf("name is required")
	case len(in.Name) > maxNameLength:
		return fmt.Errorf("name is longer than %d characters", maxNameLength)
	}
	for _, a := range s.apps {
		if a.App.ID != self && a.App.Tenant == in.Tenant && a.App.Name == in.Name {
			return fmt.Errorf("tenant %s already has an application named %q", in.Tenant, in.Name)
		}
	}
	labels := map[string]any{}
	for k, v := range in.Labels {
		if msg := checkLabelKey(k); msg != "" {
			return fmt.Errorf("label key %q %s", k, msg)
		}
		norm, err := normalise(v)
		if err != nil {
			return fmt.Errorf("label %q %w", k, err)
		}
		labels[k] = norm
	}
	in.Labels = labels
	seen := map[string]bool{}
	for i, b := range in.Bundles {
		switch {
		case strings.TrimSpace(b.Name) == "":
			return fmt.Errorf("bundle %d: name is required", i)
		case seen[b.Name]:
			return fmt.Errorf("bundle %q is given twice", b.Name)
		case b.Auth != "" && b.Auth != AuthBasic && b.Auth != AuthOAuth:
			return fmt.Errorf("bundle %q: auth must be %q or %q", b.Name, AuthBasic, AuthOAuth)
		}
		seen[b.Name] = true
		if b.Auth == "" {
			in.Bundles[i].Auth = AuthBasic
		}
	}
	return nil
}

// apply sets the input on a; bundles kept by name keep their ID and, with the same auth type,
// their credentials; the others get new credentials for every runtime a is assigned to.
func (a *application) apply(in ApplicationInput) {
	old := map[string]Bundle{}
	for _, b := range a.App.Bundles {
		old[b.Name] = b
	}
	bundles := make([]Bundle, 0, len(in.Bundles))
	keep := map[string]bool{}
	for _, b := range in.Bundles {
		if prev, ok := old[b.Name]; ok {
			b.ID = prev.ID
			keep[b.ID] = prev.Auth == b.Auth && prev.OAuthURL == b.OAuthURL
		} else {
			b.ID = uuid.NewString()
		}
		bundles = append(bundles, b)
	}
	for rt, byBundle := range a.Credentials {
		next := map[string]map[string]any{}
		for _, b := range bundles {
			if c, ok := byBundle[b.ID]; ok && keep[b.ID] {
				next[b.ID] = c
			} else {
				next[b.ID] = credentials(b)
			}
		}
		a.Credentials[rt] = next
	}
	a.App.Name, a.App.Description, a.App.ProviderName = in.Name, in.Description, in.ProviderName
	a.App.Labels, a.App.Bundles = in.Labels, bundles
}

// assign gives the bundles of a credentials for runtime rt, unless it is assigned already.
func (a *application) assign(rt string) {
	if _, ok := a.Credentials[rt]; ok {
		return
	}
	creds := map[string]map[string]any{}
	for _, b := range a.App.Bundles {
		creds[b.ID] = credentials(b)
	}
	a.Credentials[rt] = creds
}

// unassignEverywhere removes rec, which is being unregistered, from every application.
func (s *StandIn) unassignEverywhere(rec *record) {
	for id, a := range s.apps {
		if _, ok := a.Credentials[rec.id]; ok && a.App.Tenant == rec.tenant {
			delete(a.Credentials, rec.id)
			s.durable.Touch(kindApplication, id)
		}
	}
}

// object is the application as applicationsForRuntime returns it to runtime rt. A bundle's
// credentials for rt are served as Compass serves them: its defaultInstanceAuth's credential
// (BasicCredentialData or OAuthCredentialData) and, by the ID derived from bundle and runtime,
// the runtime's instanceAuth.
func (a *application) object(rt string) object {
	bundles := make([]object, 0, len(a.App.Bundles))
	for _, b := range a.App.Bundles {
		auth := authObject(a.Credentials[rt][b.ID])
		instance := object{"id": instanceAuthID(b.ID, rt), "auth": auth, "runtimeID": rt}
		bundles = append(bundles, object{"id": b.ID, "name": b.Name, "description": optional(b.Description),
			"defaultInstanceAuth": auth, "instanceAuths": []object{instance},
			"instanceAuth": fieldFunc(func(args map[string]any) any {
				if id, _ := args["id"].(string); id == instance["id"] {
					return instance
				}
				return nil
			})})
	}
	return object{
		"id": a.App.ID, "name": a.App.Name, "description": optional(a.App.Description), "providerName": optional(a.App.ProviderName),
		"labels": fieldFunc(func(args map[string]any) any {
			labels := cloneLabels(a.App.Labels)
			if key, ok := args["key"].(string); ok {
				out := map[string]any{}
				if v, has := labels[key]; has {
					out[key] = v
				}
				return out
			}
			return labels
		}),
		"bundles": fieldFunc(func(args map[string]any) any {
			p, err := page(bundles, args, func(o object) object { return o })
			if err != nil {
				return nil
			}
			return p
		}),
		// The application's system auth, whose ID the Runtime Agent lists as the Application's client ID.
		"auths": []object{{"id": uuid.NewSHA1(uuid.NameSpaceOID, []byte("application-auth/"+a.App.ID)).String()}},
	}
}

// authObject is an Auth with the credentials as a CredentialData union member (nil for none).
func authObject(creds map[string]any) any {
	if basic, ok := creds["basic"].(map[string]any); ok {
		return object{"credential": object{"__typename": "BasicCredentialData", "username": basic["username"], "password": basic["password"]}}
	}
	if oauth, ok := creds["oauth"].(map[string]any); ok {
		return object{"credential": object{"__typename": "OAuthCredentialData", "clientId": oauth["clientId"], "clientSecret": oauth["clientSecret"], "url": oauth["url"]}}
	}
	return nil
}

func instanceAuthID(bundleID, rt string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("bundle-instance-auth/"+bundleID+"/"+rt)).String()
}

func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// requestOneTimeTokenForApplication issues a one-time token for an application of the caller's
// tenant (the application-side pairing of seed 003's first tutorial): the Connector exchanges it
// for a client certificate whose CN is the application's ID.
func (s *StandIn) requestOneTimeTokenForApplication(tenant string, args map[string]any) (any, error) {
	id, _ := args["id"].(string)
	a, ok := s.apps[id]
	if !ok || a.App.Tenant != tenant {
		return nil, notFound("object=application; id=%s", id)
	}
	token := newToken()
	auth := SystemAuth{ID: uuid.NewString(), IssuedAt: s.now()}
	a.Tokens = append(a.Tokens, auth)
	if a.TokenHashes == nil {
		a.TokenHashes = map[string]string{}
	}
	a.TokenHashes[auth.ID] = hashToken(token)
	s.durable.Touch(kindApplication, id)
	return object{"token": token, "connectorURL": s.opts.ConnectorURL, "legacyConnectorURL": s.opts.ConnectorURL, "used": false}, nil
}

// applicationToken finds the application holding the token of hash h and the index of its
// system auth.
func (s *StandIn) applicationToken(h string) (*application, int) {
	for _, a := range s.apps {
		for id, have := range a.TokenHashes {
			if have != h {
				continue
			}
			for i, t := range a.Tokens {
				if t.ID == id {
					return a, i
				}
			}
		}
	}
	return nil, -1
}

func (s *StandIn) applicationsForRuntime(tenant string, args map[string]any) (any, error) {
	rec, err := s.lookup(tenant, args["runtimeID"], "applicationsForRuntime")
	if err != nil {
		return nil, err
	}
	var assigned []*application
	for _, a := range s.sortedApps() {
		if _, ok := a.Credentials[rec.id]; ok && a.App.Tenant == tenant {
			assigned = append(assigned, a)
		}
	}
	return page(assigned, args, func(a *application) object { return a.object(rec.id) })
}

// runtimeResolvers are what a runtime authenticated by its client certificate may call: the
// Runtime Agent's operations, on itself only. Besides fetching its applications and labelling
// itself, the agent reads itself and writes itself back with its status condition (runtime and
// updateRuntime), as the original agent's SetRuntimeStatusCondition does.
func (s *StandIn) runtimeResolvers(runtimeID string) map[string]resolver {
	own := func(arg string, r resolver) resolver {
		return func(tenant string, args map[string]any) (any, error) {
			if id, _ := args[arg].(string); id != runtimeID {
				return nil, gql.Errorf(gql.KindUnauthorized, "the client certificate of runtime %s does not allow access to runtime %s", runtimeID, id)
			}
			return r(tenant, args)
		}
	}
	return map[string]resolver{
		"applicationsForRuntime": own("runtimeID", s.applicationsForRuntime),
		"setRuntimeLabel":        own("runtimeID", s.setRuntimeLabel),
		"runtime":                own("id", s.runtime),
		"updateRuntime":          own("id", s.updateRuntime),
	}
}

// admin serves the application endpoints under /_sandbox/director/.
func (s *StandIn) admin() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /applications", func(w http.ResponseWriter, _ *http.Request) {
		sandbox.WriteJSON(w, http.StatusOK, map[string]any{"applications": s.Applications()})
	})
	m.HandleFunc("POST /applications", s.handleRegisterApplication)
	m.HandleFunc("PUT /applications/{id}", s.onApp(s.changeApplication))
	m.HandleFunc("DELETE /applications/{id}", s.onApp(s.deleteApplication))
	m.HandleFunc("PUT /applications/{id}/runtimes/{runtime}", s.onApp(s.assign))
	m.HandleFunc("DELETE /applications/{id}/runtimes/{runtime}", s.onApp(s.unassign))
	return s.durable.Handler(m)
}

type adminError struct {
	Message string `json:"message"`
}

func decodeInput(w http.ResponseWriter, r *http.Request) (ApplicationInput, bool) {
	var in ApplicationInput
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, adminError{Message: "decoding the application: " + err.Error()})
		return in, false
	}
	return in, true
}

func (s *StandIn) handleRegisterApplication(w http.ResponseWriter, r *http.Request) {
	in, ok := decodeInput(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(&in, ""); err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, adminError{Message: err.Error()})
		return
	}
	a := &application{Seq: int64(s.seq.Inc(seqApplications)), App: Application{ID: uuid.NewString(), Tenant: in.Tenant},
		Credentials: map[string]map[string]map[string]any{}}
	a.apply(in)
	s.apps[a.App.ID] = a
	s.durable.Touch(kindApplication, a.App.ID)
	sandbox.WriteJSON(w, http.StatusCreated, a.view())
}

// onApp serves a request about the application of the path's {id} with fn, with the lock held;
// it answers 404 when there is no such application.
func (s *StandIn) onApp(fn func(w http.ResponseWriter, r *http.Request, a *application)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		a, ok := s.apps[r.PathValue("id")]
		if !ok {
			sandbox.WriteJSON(w, http.StatusNotFound, adminError{Message: fmt.Sprintf("no application %s", r.PathValue("id"))})
			return
		}
		fn(w, r, a)
		s.durable.Touch(kindApplication, a.App.ID)
	}
}

func (s *StandIn) changeApplication(w http.ResponseWriter, r *http.Request, a *application) {
	in, ok := decodeInput(w, r)
	if !ok {
		return
	}
	if in.Tenant == "" {
		in.Tenant = a.App.Tenant
	}
	if in.Tenant != a.App.Tenant {
		sandbox.WriteJSON(w, http.StatusBadRequest, adminError{Message: "an application cannot move to another tenant"})
		return
	}
	if err := s.check(&in, a.App.ID); err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, adminError{Message: err.Error()})
		return
	}
	a.apply(in)
	sandbox.WriteJSON(w, http.StatusOK, a.view())
}

func (s *StandIn) deleteApplication(w http.ResponseWriter, _ *http.Request, a *application) {
	delete(s.apps, a.App.ID)
	w.WriteHeader(http.StatusNoContent)
}

// assign assigns the application to a runtime of its tenant; assigning it again changes nothing.
func (s *StandIn) assign(w http.ResponseWriter, r *http.Request, a *application) {
	rt := r.PathValue("runtime")
	if _, ok := s.get(a.App.Tenant, rt); !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, adminError{Message: fmt.Sprintf("tenant %s has no runtime %s", a.App.Tenant, rt)})
		return
	}
	a.assign(rt)
	sandbox.WriteJSON(w, http.StatusOK, a.view())
}

// unassign removes the application from a runtime; removing it again changes nothing.
func (s *StandIn) unassign(w http.ResponseWriter, r *http.Request, a *application) {
	delete(a.Credentials, r.PathValue("runtime"))
	sandbox.WriteJSON(w, http.StatusOK, a.view())
}
