package azurestandin

import (
	"crypto/rand"
	"encoding/hex"
	"hash/fnv"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// Modes of Options.LongRunning.
const (
	LongRunningSome = "some"
	LongRunningAll  = "all"
	LongRunningNone = "none"
	LongRunningFail = "fail"
)

// LongRunningModes are the values Options.LongRunning accepts ("" is LongRunningSome).
func LongRunningModes() []string {
	return []string{LongRunningSome, LongRunningAll, LongRunningNone, LongRunningFail}
}

// Statuses of an operation resource (Azure-AsyncOperation).
const (
	StatusInProgress = "InProgress"
	StatusSucceeded  = "Succeeded"
	StatusFailed     = "Failed"
)

// CodeCreationFailed is the error code of a creation LongRunningFail lets fail.
const CodeCreationFailed = "NamespaceCreationFailed"

// asyncOp is a long-running namespace creation, kept with its namespace.
type asyncOp struct {
	ID      string    `json:"id"`
	Started time.Time `json:"started"`
	// Polls counts the reads of the operation; Ended is zero while it runs.
	Polls int       `json:"polls"`
	Ended time.Time `json:"ended"`
	// Fail makes it end Failed.
	Fail bool `json:"fail"`
}

func (o *asyncOp) running() bool { return o != nil && o.Ended.IsZero() }

func (o *asyncOp) status() string {
	switch {
	case o.running():
		return StatusInProgress
	case o.Fail:
		return StatusFailed
	}
	return StatusSucceeded
}

// longRunning tells whether the creation of the namespace name is answered 202 Accepted.
func (s *Server) longRunning(name string) bool {
	switch s.opts.LongRunning {
	case LongRunningAll, LongRunningFail:
		return true
	case LongRunningNone:
		return false
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.ToLower(name)))
	return h.Sum32()%2 == 0
}

func newOperationID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// armBase is the absolute URL of the stand-in's ARM as the caller reaches it, with the sandbox's
// path prefix, which the request still carries in RequestURI: ARM's operation URLs are absolute.
func armBase(r *http.Request) string {
	prefix := ""
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && strings.HasSuffix(u.Path, r.URL.Path) {
		prefix = strings.TrimSuffix(u.Path, r.URL.Path)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + prefix
}

// operationURL is the URL of an operation's status (Azure-AsyncOperation) or result (Location),
// under the subscription and the namespace's region, as ARM's providers prefer.
func (s *Server) operationURL(base string, ns *namespace, kind string) string {
	return base + "/subscriptions/" + s.opts.SubscriptionID + "/providers/Microsoft.EventHub/locations/" +
		url.PathEscape(normalizeLocation(ns.Location)) + "/" + kind + "/" + ns.Op.ID + "?api-version=" + EventHubAPIVersion
}

func (s *Server) retryAfter(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(s.opts.RetryAfter.Seconds())))))
}

// accept answers a long-running creation: 202 with no body and the operation's URLs.
func (s *Server) accept(w http.ResponseWriter, base string, ns *namespace) {
	w.Header().Set("Azure-AsyncOperation", s.operationURL(base, ns, "operationStatuses"))
	w.Header().Set("Location", s.operationURL(base, ns, "operationResults"))
	s.retryAfter(w)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusAccepted)
}

// findOperation finds the namespace an operation created, in a group marked as changed.
func (s *Server) findOperation(id string) (*group, *namespace) {
	for key := range s.groups.Find(lookupOperation, id) {
		g := s.group(key)
		if g == nil {
			continue
		}
		for _, ns := range g.Namespaces {
			if ns.Op != nil && ns.Op.ID == id {
				return g, ns
			}
		}
	}
	return nil, nil
}

// read counts a read of the operation, which ends it after Options.LongRunningPolls reads.
func (s *Server) read(op *asyncOp) {
	if !op.running() {
		return
	}
	op.Polls++
	if op.Polls > s.opts.LongRunningPolls {
		op.Ended = s.opts.Now()
	}
}

type operationError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type operationResource struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Status    string          `json:"status"`
	StartTime time.Time       `json:"startTime"`
	EndTime   *time.Time      `json:"endTime,omitempty"`
	Error     *operationError `json:"error,omitempty"`
}

func failure(ns *namespace) operationError {
	return operationError{Code: CodeCreationFailed, Message: "The sandbox failed the creation of namespace '" + ns.Name + "' (long-running mode fail)."}
}

// serveOperation answers GET on an operation's status (Azure-AsyncOperation: always 200 with the
// status) or result (Location: 202 while it runs, then what the PUT would have answered).
func (s *Server) serveOperation(w http.ResponseWriter, rt route, base string) {
	results := rt.kind == kindOperationResult
	if results {
		s.totals.Inc("operation.result")
	} else {
		s.totals.Inc("operation.status")
	}
	g, ns := s.findOperation(rt.operation)
	if ns == nil || !strings.EqualFold(normalizeLocation(ns.Location), rt.location) {
		writeError(w, http.StatusNotFound, "NotFound", "The operation '%s' was not found in location '%s'.", rt.operation, rt.location)
		return
	}
	op := ns.Op
	s.read(op)
	if results {
		switch {
		case op.running():
			w.Header().Set("Location", s.operationURL(base, ns, "operationResults"))
			s.retryAfter(w)
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusAccepted)
		case op.Fail:
			e := failure(ns)
			writeError(w, http.StatusBadRequest, e.Code, "%s", e.Message)
		default:
			sandbox.WriteJSONCharset(w, http.StatusOK, s.namespaceJSON(g, ns))
		}
		return
	}
	id, _, _ := strings.Cut(s.operationURL("", ns, "operationStatuses"), "?")
	res := operationResource{ID: id, Name: op.ID, Status: op.status(), StartTime: op.Started}
	if !op.running() {
		end := op.Ended
		res.EndTime = &end
	} else {
		s.retryAfter(w)
	}
	if op.Fail && !op.running() {
		e := failure(ns)
		res.Error = &e
	}
	sandbox.WriteJSONCharset(w, http.StatusOK, res)
}
