// Package sandbox serves stand-ins for the external systems the broker talks to (AVS first), each
// under its own path prefix (/avs/...), with inspection endpoints and fault injection under
// /_sandbox/. It is an http.Handler, so it can run on its own (cmd/sandbox) or inside another process.
// The stand-ins keep their state in a Store (Durable), so they answer as before after a crash;
// faults and Stats are test settings and stay in memory.
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/internal/httpbody"
)

// System is a stand-in for one external system. It is mounted at /<Name()>/ and sees request paths
// with that prefix removed. It keeps its state durably (Durable) and must be safe for concurrent use.
type System interface {
	http.Handler
	// Name is the path prefix and the name used on the /_sandbox/<name>/ endpoints.
	Name() string
	// Objects returns a JSON-encodable snapshot of what exists, with per-object call counts.
	Objects() any
	// Reset forgets everything created and every count, durably.
	Reset(ctx context.Context) error
}

// Administered is a System with admin endpoints of its own, served at /_sandbox/<name>/<path>
// with the /_sandbox/<name> prefix removed, beside the endpoints every system has.
type Administered interface {
	Admin() http.Handler
}

// Options configures a Sandbox.
type Options struct {
	// Seed seeds the random source that decides which requests get injected errors, so that a run
	// with the same seed and the same sequence of requests injects the same errors.
	Seed uint64
	// Now returns the current time for outage windows; time.Now when nil.
	Now func() time.Time
	// Log receives one entry per injected fault and per admin change; discarded when nil.
	Log logrus.FieldLogger
	// Admin are the credentials the /_sandbox/ endpoints require; none when its password is empty.
	Admin AdminConfig
}

// Stats counts what the fault injection did to the requests of one system.
type Stats struct {
	Requests  int `json:"requests"`
	Served    int `json:"served"`
	Delayed   int `json:"delayed"`
	Abandoned int `json:"abandoned"`
	Outage    int `json:"outage"`
	Errors500 int `json:"errors500"`
	Errors503 int `json:"errors503"`
	// LostResponses were handled by the stand-in but answered with 502.
	LostResponses int `json:"lostResponses"`
}

type entry struct {
	sys     System
	handler http.Handler
	faults  Faults
	stats   Stats
}

// Sandbox hosts the stand-ins. Create it with New and add stand-ins with Register.
type Sandbox struct {
	now   func() time.Time
	log   logrus.FieldLogger
	admin *http.ServeMux
	auth  AdminConfig

	mu      sync.Mutex
	rnd     *rand.Rand
	systems map[string]*entry
}

// New returns an empty sandbox.
func New(opts Options) *Sandbox {
	s := &Sandbox{
		now:     opts.Now,
		log:     opts.Log,
		auth:    opts.Admin,
		rnd:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5DEECE66D)),
		systems: map[string]*entry{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		l := logrus.New()
		l.SetOutput(discard{})
		s.log = l
	}
	s.admin = http.NewServeMux()
	s.admin.HandleFunc("GET /_sandbox/{$}", s.handleList)
	s.admin.HandleFunc("POST /_sandbox/reset", s.handleResetAll)
	s.admin.HandleFunc("GET /_sandbox/{system}/objects", s.handleObjects)
	s.admin.HandleFunc("GET /_sandbox/{system}/faults", s.handleGetFaults)
	s.admin.HandleFunc("PUT /_sandbox/{system}/faults", s.handlePutFaults)
	s.admin.HandleFunc("DELETE /_sandbox/{system}/faults", s.handleDeleteFaults)
	s.admin.HandleFunc("GET /_sandbox/{system}/stats", s.handleStats)
	s.admin.HandleFunc("POST /_sandbox/{system}/reset", s.handleResetOne)
	s.admin.HandleFunc("/_sandbox/{system}/", s.handleSystemAdmin)
	return s
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Register mounts a stand-in at /<name>/.
func (s *Sandbox) Register(sys System) error {
	name := sys.Name()
	if !validName.MatchString(name) || name == "reset" {
		return fmt.Errorf("sandbox: invalid system name %q", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.systems[name]; ok {
		return fmt.Errorf("sandbox: system %q is already registered", name)
	}
	s.systems[name] = &entry{sys: sys, handler: http.StripPrefix("/"+name, sys)}
	return nil
}

// Systems lists the registered system names, sorted.
func (s *Sandbox) Systems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.systems))
	for n := range s.systems {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetFaults replaces the faults of a system.
func (s *Sandbox) SetFaults(system string, f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.systems[system]
	if !ok {
		return fmt.Errorf("sandbox: unknown system %q", system)
	}
	e.faults = f
	s.log.WithFields(logrus.Fields{"system": system, "errorRate": f.ErrorRate, "latency": f.Latency.String(),
		"outageFrom": f.OutageFrom, "outageUntil": f.OutageUntil}).Info("faults set")
	return nil
}

// Faults returns the faults of a system.
func (s *Sandbox) Faults(system string) (Faults, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.systems[system]
	if !ok {
		return Faults{}, fmt.Errorf("sandbox: unknown system %q", system)
	}
	return e.faults, nil
}

// Stats returns what fault injection did to a system's requests since the last reset.
func (s *Sandbox) Stats(system string) (Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.systems[system]
	if !ok {
		return Stats{}, fmt.Errorf("sandbox: unknown system %q", system)
	}
	return e.stats, nil
}

// Reset forgets the state and counts of every system. Faults stay as they are.
func (s *Sandbox) Reset(ctx context.Context) error {
	s.mu.Lock()
	entries := make([]*entry, 0, len(s.systems))
	for _, e := range s.systems {
		e.stats = Stats{}
		entries = append(entries, e)
	}
	s.mu.Unlock()
	var errs []error
	for _, e := range entries {
		errs = append(errs, e.sys.Reset(ctx))
	}
	return errors.Join(errs...)
}

// ServeHTTP routes /_sandbox/... to the admin endpoints and /<system>/... through the system's
// faults to its stand-in.
func (s *Sandbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_sandbox" || strings.HasPrefix(r.URL.Path, "/_sandbox/") {
		if s.auth.authorized(w, r) {
			s.admin.ServeHTTP(w, r)
		}
		return
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.mu.Lock()
	e, ok := s.systems[name]
	if !ok {
		s.mu.Unlock()
		WriteJSON(w, http.StatusNotFound, errorBody{Message: fmt.Sprintf("no sandbox system at /%s", name)})
		return
	}
	e.stats.Requests++
	f := e.faults
	s.mu.Unlock()

	if f.Latency > 0 {
		// Read the body first: until it is consumed, net/http does not notice the client going away.
		if !BufferBody(w, r) {
			return
		}
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			s.mu.Lock()
			e.stats.Abandoned++
			s.mu.Unlock()
			return
		}
	}

	status, lose := 0, false
	s.mu.Lock()
	if f.Latency > 0 {
		e.stats.Delayed++
	}
	switch {
	case f.InOutage(s.now()):
		e.stats.Outage++
		status = http.StatusServiceUnavailable
	case f.ErrorRate > 0 && s.rnd.Float64() < f.ErrorRate:
		if s.rnd.IntN(2) == 0 {
			e.stats.Errors503++
			status = http.StatusServiceUnavailable
		} else {
			e.stats.Errors500++
			status = http.StatusInternalServerError
		}
	default:
		e.stats.Served++
		if f.LostResponseRate > 0 && s.rnd.Float64() < f.LostResponseRate {
			e.stats.LostResponses++
			lose = true
		}
	}
	s.mu.Unlock()

	if status != 0 {
		s.log.WithFields(logrus.Fields{"system": name, "method": r.Method, "path": r.URL.Path, "status": status}).
			Debug("injected fault")
		WriteJSON(w, status, errorBody{Message: fmt.Sprintf("sandbox: injected fault in %s", name)})
		return
	}
	if lose {
		e.handler.ServeHTTP(discardWriter{header: http.Header{}}, r)
		s.log.WithFields(logrus.Fields{"system": name, "method": r.Method, "path": r.URL.Path}).Debug("injected lost response")
		WriteJSON(w, http.StatusBadGateway, errorBody{Message: fmt.Sprintf("sandbox: injected lost response in %s", name)})
		return
	}
	e.handler.ServeHTTP(w, r)
}

// discardWriter swallows a stand-in's answer to a request whose response is "lost".
type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header       { return d.header }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// maxBody bounds the request bodies buffered while injecting latency or waiting for a stand-in.
const maxBody = 8 << 20

// BufferBody reads the request's body into memory, answering 400 when it cannot.
func BufferBody(w http.ResponseWriter, r *http.Request) bool {
	body, err := httpbody.Read(http.MaxBytesReader(w, r.Body, maxBody), r.ContentLength, maxBody)
	if err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody{Message: "reading request body: " + err.Error()})
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

type errorBody struct {
	Message string `json:"message"`
}

// WriteJSON answers status with v encoded as JSON (as json.Encoder writes it: a newline after);
// the stand-ins answer every request with it.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	writeJSONAs(w, "application/json", status, v)
}

// writeJSONAs is WriteJSON with another content type.
func writeJSONAs(w http.ResponseWriter, contentType string, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteJSONCharset is WriteJSON naming the charset (as Azure's endpoints do).
func WriteJSONCharset(w http.ResponseWriter, status int, v any) {
	writeJSONAs(w, "application/json; charset=utf-8", status, v)
}

func (s *Sandbox) lookup(w http.ResponseWriter, r *http.Request) (*entry, string, bool) {
	name := r.PathValue("system")
	s.mu.Lock()
	e, ok := s.systems[name]
	s.mu.Unlock()
	if !ok {
		WriteJSON(w, http.StatusNotFound, errorBody{Message: fmt.Sprintf("unknown system %q", name)})
	}
	return e, name, ok
}

type systemView struct {
	Name   string `json:"name"`
	Faults Faults `json:"faults"`
	Stats  Stats  `json:"stats"`
}

func (s *Sandbox) handleList(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := make([]systemView, 0, len(s.systems))
	for name, e := range s.systems {
		out = append(out, systemView{Name: name, Faults: e.faults, Stats: e.stats})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	WriteJSON(w, http.StatusOK, map[string]any{"systems": out})
}

func (s *Sandbox) handleResetAll(w http.ResponseWriter, r *http.Request) {
	if err := s.Reset(r.Context()); err != nil {
		WriteJSON(w, http.StatusInternalServerError, errorBody{Message: err.Error()})
		return
	}
	s.log.Info("sandbox reset")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sandbox) handleResetOne(w http.ResponseWriter, r *http.Request) {
	e, name, ok := s.lookup(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	e.stats = Stats{}
	s.mu.Unlock()
	if err := e.sys.Reset(r.Context()); err != nil {
		WriteJSON(w, http.StatusInternalServerError, errorBody{Message: err.Error()})
		return
	}
	s.log.WithField("system", name).Info("system reset")
	w.WriteHeader(http.StatusNoContent)
}

// handleSystemAdmin serves a system's own admin endpoints.
func (s *Sandbox) handleSystemAdmin(w http.ResponseWriter, r *http.Request) {
	e, name, ok := s.lookup(w, r)
	if !ok {
		return
	}
	a, ok := e.sys.(Administered)
	if !ok {
		WriteJSON(w, http.StatusNotFound, errorBody{Message: fmt.Sprintf("system %q has no endpoint %s", name, r.URL.Path)})
		return
	}
	http.StripPrefix("/_sandbox/"+name, a.Admin()).ServeHTTP(w, r)
}

func (s *Sandbox) handleObjects(w http.ResponseWriter, r *http.Request) {
	e, _, ok := s.lookup(w, r)
	if !ok {
		return
	}
	WriteJSON(w, http.StatusOK, e.sys.Objects())
}

func (s *Sandbox) handleStats(w http.ResponseWriter, r *http.Request) {
	_, name, ok := s.lookup(w, r)
	if !ok {
		return
	}
	st, _ := s.Stats(name)
	WriteJSON(w, http.StatusOK, st)
}

func (s *Sandbox) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	_, name, ok := s.lookup(w, r)
	if !ok {
		return
	}
	f, _ := s.Faults(name)
	WriteJSON(w, http.StatusOK, f)
}

func (s *Sandbox) handlePutFaults(w http.ResponseWriter, r *http.Request) {
	_, name, ok := s.lookup(w, r)
	if !ok {
		return
	}
	var f Faults
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&f); err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody{Message: "decoding faults: " + err.Error()})
		return
	}
	if err := s.SetFaults(name, f); err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody{Message: err.Error()})
		return
	}
	WriteJSON(w, http.StatusOK, f)
}

func (s *Sandbox) handleDeleteFaults(w http.ResponseWriter, r *http.Request) {
	_, name, ok := s.lookup(w, r)
	if !ok {
		return
	}
	_ = s.SetFaults(name, Faults{})
	w.WriteHeader(http.StatusNoContent)
}
