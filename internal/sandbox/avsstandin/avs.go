// Package avsstandin is the sandbox stand-in for SAP's Availability Service (AVS) evaluation API as
// the original broker used it (internal/clients/avs/testdata/contract.json): an OAuth2 token
// endpoint (password grant, or client credentials) and the v2 evaluation metadata resource: create,
// get, delete, POST tag and unlink from a parent. It refuses what the real API refuses: another
// method or path (no list by name, no linking endpoint), a threshold that is not a string, a body
// that is not JSON, deleting an evaluation its parent still holds. It keeps its state in a durable.Store (one row per evaluation and
// counter) and counts calls per evaluation and creations per name, so tests can see duplicates.
package avsstandin

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// Name is the path prefix the stand-in is mounted at.
const Name = "avs"

// Tag is an evaluation tag.
type Tag struct {
	Content      string `json:"content"`
	TagClassID   int64  `json:"tag_class_id"`
	TagClassName string `json:"tag_class_name"`
}

// Definition is what a client defines: the body of POST /api/v2/evaluationmetadata.
type Definition struct {
	Name             string `json:"name"`
	Description      string `json:"description"`
	DefinitionType   string `json:"definition_type"`
	URL              string `json:"url"`
	CheckType        string `json:"check_type"`
	Interval         int32  `json:"interval"`
	TesterAccessID   int64  `json:"tester_access_id"`
	Timeout          int    `json:"timeout"`
	ReadOnly         bool   `json:"read_only"`
	ContentCheck     string `json:"content_check"`
	ContentCheckType string `json:"content_check_type"`
	// Threshold is a string of digits in requests; answers carry it as a number (Evaluation).
	Threshold  threshold `json:"threshold"`
	Service    string    `json:"service"`
	GroupID    int64     `json:"group_id"`
	Visibility string    `json:"visibility"`
	ParentID   int64     `json:"parent_id"`
	Tags       []Tag     `json:"tags"`
}

// threshold is the request's threshold: the API takes a JSON string of digits, not a number.
type threshold int64

func (t *threshold) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("threshold must be a string, got %s", b)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("threshold %q is not a number", s)
	}
	*t = threshold(n)
	return nil
}

// Evaluation is an evaluation as the API returns it: its definition and what AVS adds.
type Evaluation struct {
	ID int64 `json:"id"`
	Definition
	// Threshold shadows the definition's: a number in answers.
	Threshold   int64  `json:"threshold"`
	Status      string `json:"status"`
	Owner       string `json:"owner"`
	DateCreated int64  `json:"dateCreated"`
}

// Options configures the stand-in.
type Options struct {
	// ClientID and ClientSecret are the only credentials the token endpoint accepts.
	ClientID     string
	ClientSecret string
	// Username and Password, when set, are the resource owner the password grant accepts.
	Username, Password string
	// TokenTTL is the lifetime of issued tokens; one hour when zero.
	TokenTTL time.Duration
	// ParentIDs are parent evaluations that exist from the start and survive Reset, like the
	// pre-provisioned parent evaluation the broker's configuration points at.
	ParentIDs []int64
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Store keeps the evaluations and counts; Open loads them from it. New uses a new MemoryStore.
	Store durable.Store
}

// Object is one evaluation in the inspection snapshot with the calls made on it.
type Object struct {
	Evaluation
	Calls map[string]int `json:"calls"`
}

// Objects is the inspection snapshot served at GET /_sandbox/avs/objects.
type Objects struct {
	// Evaluations lists the existing evaluations by id.
	Evaluations []Object `json:"evaluations"`
	// CreatesByName counts successful creations per evaluation name, deleted ones included.
	CreatesByName map[string]int `json:"createsByName"`
	// DeletesByName counts successful deletions per evaluation name.
	DeletesByName map[string]int `json:"deletesByName"`
	// Calls counts authorised calls per operation, including those that failed validation.
	Calls map[string]int `json:"calls"`
}

// StandIn is the AVS stand-in; it implements sandbox.System.
type StandIn struct {
	opts Options
	mux  *http.ServeMux

	issuer *sandbox.TokenIssuer

	durable *durable.Durable
	handler http.Handler

	mu            sync.Mutex
	seq           *durable.Counts        // the last evaluation ID given
	evals         *durable.Table[stored] // by ID; found by name too
	createsByName *durable.Counts
	deletesByName *durable.Counts
	totals        *durable.Counts
}

// The kinds of rows in the store.
const (
	kindEvaluation = "evaluation"
	kindSeq        = "seq"
	kindCreates    = "createsByName"
	kindDeletes    = "deletesByName"
	kindTotals     = "calls"
	lookupName     = "name"
	lookupParent   = "parent"

	// firstID is the ID before the first created evaluation's.
	firstID = 100000
)

// stored is an evaluation's row.
type stored struct {
	Evaluation Evaluation     `json:"evaluation"`
	Calls      map[string]int `json:"calls"`
}

// New returns a stand-in with only the configured parent evaluations that keeps its state in memory.
func New(opts Options) *StandIn {
	opts.Store = nil // a new MemoryStore
	return durable.InMemory(Open(context.Background(), opts))
}

// Open returns a stand-in with the evaluations and counts kept in opts.Store; on an empty store it
// has only the configured parent evaluations.
func Open(ctx context.Context, opts Options) (*StandIn, error) {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &StandIn{opts: opts}
	s.issuer = sandbox.NewTokenIssuer(opts.ClientID, opts.ClientSecret, opts.TokenTTL, opts.Now)
	s.issuer.Realm = Name
	s.issuer.Count = s.countEvents
	if opts.Username != "" {
		s.issuer.AcceptPassword(opts.Username, opts.Password)
	}
	s.durable = durable.NewDurable(durable.Persist{Store: opts.Store, System: Name, Lock: &s.mu})
	s.evals = durable.NewTable[stored](s.durable, kindEvaluation, false)
	s.evals.Lookup(lookupName, func(st *stored) []string { return []string{st.Evaluation.Name} })
	// Every internal evaluation names the configured parent: a shared lookup.
	s.evals.SharedLookup(lookupParent, func(st *stored) []string {
		if st.Evaluation.ParentID == 0 {
			return nil
		}
		return []string{key(st.Evaluation.ParentID)}
	})
	s.seq = s.durable.Counts(kindSeq)
	s.createsByName = s.evals.Counts(lookupName, "creates", kindCreates)
	s.deletesByName = s.evals.Counts(lookupName, "deletes", kindDeletes)
	s.totals = s.durable.Tally(kindTotals)
	if err := s.durable.Load(ctx); err != nil {
		return nil, err
	}
	if err := s.durable.Do(ctx, func() error { s.addParents(); return nil }); err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.HandleFunc("POST /oauth/token", s.issuer.ServeToken)
	const base = "/api/v2/evaluationmetadata"
	// Only the operations of the contract: any other method on these paths is answered 405.
	m.HandleFunc("POST "+base, s.issuer.Protect(jsonBody(s.handleCreate)))
	m.HandleFunc("GET "+base+"/{id}", s.issuer.Protect(s.handleGet))
	m.HandleFunc("DELETE "+base+"/{id}", s.issuer.Protect(s.handleDelete))
	m.HandleFunc("POST "+base+"/{id}/tag", s.issuer.Protect(jsonBody(s.handleTag)))
	m.HandleFunc("DELETE "+base+"/{id}/child/{child}", s.issuer.Protect(s.handleUnlink))
	s.mux = m
	s.handler = s.durable.Handler(m)
	return s, nil
}

// Name implements sandbox.System.
func (s *StandIn) Name() string { return Name }

// ServeHTTP implements sandbox.System; paths are relative to /avs.
func (s *StandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Objects implements sandbox.System.
func (s *StandIn) Objects() any { return s.Snapshot() }

// Reset implements sandbox.System: it forgets every evaluation and count but the configured
// parents, durably, and keeps issued tokens valid.
func (s *StandIn) Reset(ctx context.Context) error {
	if err := s.durable.Reset(ctx); err != nil {
		return err
	}
	return s.durable.Do(ctx, func() error { s.addParents(); return nil })
}

// addParents gives an empty store (new or reset) the configured parents; called with the lock held.
func (s *StandIn) addParents() {
	if s.seq.Get(kindEvaluation) != 0 {
		return
	}
	s.seq.Add(kindEvaluation, firstID)
	for _, id := range s.opts.ParentIDs {
		s.put(&stored{Evaluation: Evaluation{ID: id, Definition: Definition{Name: fmt.Sprintf("parent-%d", id), DefinitionType: "COMPOSED", Tags: []Tag{}},
			Status: "ACTIVE", Owner: "sandbox", DateCreated: s.opts.Now().UnixMilli()}})
	}
}

func key(id int64) string { return strconv.FormatInt(id, 10) }

func (s *StandIn) get(id int64) (*stored, bool) { return s.evals.Get(key(id)) }

// put stores the evaluation (new or changed), to be written before the answer.
func (s *StandIn) put(st *stored) { s.evals.Put(key(st.Evaluation.ID), st) }

// sortedEvals returns the evaluations by ID.
func sortedEvals(m map[string]*stored) []*stored {
	out := make([]*stored, 0, len(m))
	for _, st := range m {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Evaluation.ID < out[j].Evaluation.ID })
	return out
}

// Snapshot returns the inspection snapshot.
func (s *StandIn) Snapshot() Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Objects{
		Evaluations:   []Object{},
		CreatesByName: s.createsByName.Map(),
		DeletesByName: s.deletesByName.Map(),
		Calls:         s.totals.Map(),
	}
	for _, st := range sortedEvals(s.evals.All()) {
		calls := map[string]int{}
		for k, v := range st.Calls {
			calls[k] = v
		}
		out.Evaluations = append(out.Evaluations, Object{Evaluation: clone(&st.Evaluation), Calls: calls})
	}
	return out
}

func clone(e *Evaluation) Evaluation {
	c := *e
	c.Tags = append([]Tag{}, e.Tags...)
	return c
}

// apiError is the API's error body (the original broker read status and message).
type apiError struct {
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
}

func (s *StandIn) countEvents(events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		s.totals.Inc(ev)
	}
}

func pathID(w http.ResponseWriter, r *http.Request, key string) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue(key), 10, 64)
	if err != nil || id <= 0 {
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: fmt.Sprintf("invalid evaluation id %q", r.PathValue(key))})
		return 0, false
	}
	return id, true
}

func validate(req *Definition) string {
	switch {
	case strings.TrimSpace(req.Name) == "":
		return "name is required"
	case len(req.Name) > 255:
		return "name is longer than 255 characters"
	case req.DefinitionType == "":
		return "definition_type is required"
	case req.DefinitionType == "BASIC" && req.URL == "":
		return "url is required for a BASIC evaluation"
	case req.Interval < 0 || req.Timeout < 0 || req.Threshold < 0:
		return "interval, timeout and threshold must not be negative"
	}
	for _, t := range req.Tags {
		if msg := validateTag(t); msg != "" {
			return msg
		}
	}
	return ""
}

func validateTag(t Tag) string {
	if t.Content == "" || t.TagClassID <= 0 {
		return "a tag needs content and a positive tag_class_id"
	}
	return ""
}

func (s *StandIn) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req Definition
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		s.count(0, "create")
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "invalid JSON: " + err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("create")
	if msg := validate(&req); msg != "" {
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: msg})
		return
	}
	if req.ParentID != 0 {
		if _, ok := s.get(req.ParentID); !ok {
			sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: fmt.Sprintf("parent evaluation %d does not exist", req.ParentID)})
			return
		}
	}
	// The durable sequence is written with every evaluation: an ID it gives is taken only by a
	// configured parent (added with the sequence), so nothing is read to find a free one.
	id := int64(s.seq.Inc(kindEvaluation))
	for slices.Contains(s.opts.ParentIDs, id) {
		id = int64(s.seq.Inc(kindEvaluation))
	}
	st := &stored{Evaluation: Evaluation{ID: id, Definition: req, Threshold: int64(req.Threshold), Status: "ACTIVE", Owner: s.opts.ClientID, DateCreated: s.opts.Now().UnixMilli()},
		Calls: map[string]int{"create": 1}}
	e := &st.Evaluation
	e.Definition.Threshold = 0 // kept as the answer's number (Evaluation.Threshold), which shadows it
	e.Tags = []Tag{}           // rebuilt below: a tag given twice is kept once
	for _, t := range req.Tags {
		e.Tags = addTag(e.Tags, t)
	}
	s.evals.Create(key(id), st)
	s.createsByName.Add(e.Name, 1)
	sandbox.WriteJSON(w, http.StatusOK, clone(e))
}

func (s *StandIn) count(id int64, op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countLocked(id, op)
}

func (s *StandIn) countLocked(id int64, op string) {
	s.totals.Inc(op)
	s.countOn(id, op)
}

// countOn counts op on the evaluation id, if it exists.
func (s *StandIn) countOn(id int64, op string) {
	if st, ok := s.get(id); ok {
		if st.Calls == nil {
			st.Calls = map[string]int{}
		}
		st.Calls[op]++
		s.put(st)
	}
}

func (s *StandIn) handleGet(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countLocked(id, "get")
	st, ok := s.get(id)
	if !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("evaluation %d not found", id)})
		return
	}
	sandbox.WriteJSON(w, http.StatusOK, clone(&st.Evaluation))
}

func (s *StandIn) handleDelete(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals.Inc("delete")
	st, ok := s.get(id)
	if !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("evaluation %d not found", id)})
		return
	}
	if p := st.Evaluation.ParentID; p != 0 {
		if _, held := s.get(p); held {
			sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: fmt.Sprintf("evaluation %d is a subevaluation of %d: remove it from its parent first", id, p)})
			return
		}
	}
	s.evals.Delete(key(id))
	for _, other := range s.evals.Find(lookupParent, key(id)) {
		if other.Evaluation.ParentID == id {
			other.Evaluation.ParentID = 0
			s.put(other)
		}
	}
	s.deletesByName.Add(st.Evaluation.Name, 1)
	sandbox.WriteJSON(w, http.StatusOK, clone(&st.Evaluation))
}

func (s *StandIn) handleTag(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	var t Tag
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&t); err != nil {
		s.count(id, "tag")
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: "invalid JSON: " + err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countLocked(id, "tag")
	st, ok := s.get(id)
	if !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("evaluation %d not found", id)})
		return
	}
	if msg := validateTag(t); msg != "" {
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Message: msg})
		return
	}
	st.Evaluation.Tags = addTag(st.Evaluation.Tags, t)
	s.put(st)
	sandbox.WriteJSON(w, http.StatusOK, clone(&st.Evaluation))
}

// addTag adds t unless a tag with the same class and content is already there.
func addTag(tags []Tag, t Tag) []Tag {
	for _, have := range tags {
		if have.TagClassID == t.TagClassID && have.Content == t.Content {
			return tags
		}
	}
	return append(tags, t)
}

func (s *StandIn) handleUnlink(w http.ResponseWriter, r *http.Request) {
	pid, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	cid, ok := pathID(w, r, "child")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countLocked(pid, "removeChild")
	if cid != pid {
		s.countOn(cid, "removeChild")
	}
	if _, ok := s.get(pid); !ok {
		sandbox.WriteJSON(w, http.StatusNotFound, apiError{Message: fmt.Sprintf("evaluation %d not found", pid)})
		return
	}
	child, ok := s.get(cid)
	if !ok || child.Evaluation.ParentID != pid {
		// The real API's words, which the original broker looked for.
		sandbox.WriteJSON(w, http.StatusBadRequest, apiError{Status: http.StatusBadRequest,
			Message: fmt.Sprintf("Evaluation %d does not contain subevaluation %d", pid, cid)})
		return
	}
	child.Evaluation.ParentID = 0
	s.put(child)
	sandbox.WriteJSON(w, http.StatusOK, clone(&child.Evaluation))
}

// jsonBody refuses a request whose body is not declared JSON, as the API does (415).
func jsonBody(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			sandbox.WriteJSON(w, http.StatusUnsupportedMediaType, apiError{Status: http.StatusUnsupportedMediaType,
				Message: fmt.Sprintf("content type %q is not application/json", r.Header.Get("Content-Type"))})
			return
		}
		next(w, r)
	}
}
