package broker

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"code.cloudfoundry.org/lager/v3"
	"github.com/google/uuid"
	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
	"github.com/sirupsen/logrus"
)

const (
	instancesPathPrefix     = "/v2/service_instances/"
	lastOperationPathSuffix = "/last_operation"
)

// lastOperationInstance returns the instance ID of a GET /v2/service_instances/{id}/last_operation
// that lastOperationServer answers exactly as gorilla/mux and brokerapi would: a path mux would
// not clean (and redirect) and chi would route by Path (no RawPath), and no body (brokerapi's
// FormValue reads multipart bodies of GETs too). Every other request takes the router.
func lastOperationInstance(req *http.Request) (string, bool) {
	p := req.URL.Path
	if req.Method != http.MethodGet || req.URL.RawPath != "" || (req.Body != nil && req.Body != http.NoBody) ||
		len(p) <= len(instancesPathPrefix)+len(lastOperationPathSuffix) ||
		!strings.HasPrefix(p, instancesPathPrefix) || !strings.HasSuffix(p, lastOperationPathSuffix) {
		return "", false
	}
	id := p[len(instancesPathPrefix) : len(p)-len(lastOperationPathSuffix)]
	if id == "." || id == ".." || strings.IndexByte(id, '/') >= 0 {
		return "", false
	}
	return id, true
}

// lastOperationServer answers GET /v2/service_instances/{id}/last_operation behind the request
// log and V2Auth, without gorilla/mux and brokerapi: platforms poll it, and the two routers,
// brokerapi's middlewares (a request copy each, a correlation UUID) and its per-request lager
// lines cost more than the database read. It makes osbGuard's checks and gives brokerapi's
// answers (status, headers, body, lager lines); TestLastOperationServerAnswersAsBrokerapi
// compares the two paths.
type lastOperationServer struct {
	b *Broker
	// lg is the lager logger brokerapi is given (failures at warning, the rest at debug).
	lg  lager.Logger
	log logrus.FieldLogger
}

func (s *lastOperationServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	instanceID, ok := lastOperationInstance(req)
	if !ok { // the router sends only what lastOperationInstance matches
		writeDescription(w, req, http.StatusNotFound, "not a last_operation request")
		return
	}
	if err := checkAPIVersion(req.Header.Get("X-Broker-API-Version")); err != nil {
		writeDescription(w, req, http.StatusPreconditionFailed, err.Error())
		return
	}
	if err := CheckID("instance_id", instanceID); err != nil {
		writeDescription(w, req, http.StatusBadRequest, err.Error())
		return
	}
	q := parsePollQuery(req.URL.RawQuery)
	if q.operation != "" {
		if err := CheckID("operation", q.operation); err != nil {
			writeDescription(w, req, http.StatusBadRequest, err.Error())
			return
		}
	}
	requestID := req.Header.Get("X-Broker-API-Request-Identity")
	// brokerapi's lines are debug (lagerSink): built only when written, or for a failure.
	var logger lager.Logger
	if debugEnabled(s.log) {
		logger = s.session(req, instanceID, requestID)
		logger.Info("starting-check-for-operation")
	}
	details := domain.PollDetails{PlanID: q.planID, ServiceID: q.serviceID, OperationData: q.operation}
	op, err := s.b.LastOperation(withRequestID(req.Context(), requestID), instanceID, details)
	if err != nil {
		if logger == nil {
			logger = s.session(req, instanceID, requestID)
		}
		if fr, ok := err.(*apiresponses.FailureResponse); ok {
			logger.Error(fr.LoggerAction(), fr)
			respondJSON(w, fr.ValidatedStatusCode(logger), requestID, fr.ErrorResponse())
			return
		}
		logger.Error("unknown-error", err)
		respondJSON(w, http.StatusInternalServerError, requestID, apiresponses.ErrorResponse{Description: err.Error()})
		return
	}
	if logger != nil {
		logger.WithData(lager.Data{"state": op.State}).Info("done-check-for-operation")
	}
	respond(w, http.StatusOK, requestID, lastOperationBody(op))
}

// session is the lager session brokerapi's handler logs with.
func (s *lastOperationServer) session(req *http.Request, instanceID, requestID string) lager.Logger {
	return s.lg.Session("lastOperation", lager.Data{"instance-id": instanceID},
		lager.Data{"correlation-id": correlationID(req), "requestIdentity": requestID})
}

// correlationIDHeaders are the headers brokerapi takes a correlation ID from, in its order.
var correlationIDHeaders = [...]string{"X-Correlation-ID", "X-CorrelationID", "X-ForRequest-ID", "X-Request-ID", "X-Vcap-Request-Id"}

// correlationID is brokerapi's: the first of its headers set, or a new UUID.
func correlationID(req *http.Request) string {
	for _, h := range correlationIDHeaders {
		if v := req.Header.Get(h); v != "" {
			return v
		}
	}
	return uuid.NewString()
}

// respondJSON writes an answer as brokerapi's handlers do.
func respondJSON(w http.ResponseWriter, status int, requestID string, body any) {
	respond(w, status, requestID, encodeJSON(body))
}

// respond writes an encoded answer with brokerapi's headers.
func respond(w http.ResponseWriter, status int, requestID string, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	if requestID != "" {
		w.Header().Set("X-Broker-API-Request-Identity", requestID)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// encodeJSON is brokerapi's encoding: HTML not escaped, a final newline.
func encodeJSON(body any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
	return buf.Bytes()
}

// lastOperationBody is brokerapi's encoding of the answer. Descriptions are plain text in
// practice: those are copied as they are; anything JSON would escape goes through the encoder.
func lastOperationBody(op domain.LastOperation) []byte {
	if !isPlainJSONString(string(op.State)) || !isPlainJSONString(op.Description) {
		return encodeJSON(apiresponses.LastOperationResponse{State: op.State, Description: op.Description})
	}
	b := make([]byte, 0, len(`{"state":"","description":""}`)+len(op.State)+len(op.Description)+1)
	b = append(b, `{"state":"`...)
	b = append(b, op.State...)
	if op.Description != "" {
		b = append(b, `","description":"`...)
		b = append(b, op.Description...)
	}
	return append(b, "\"}\n"...)
}

// isPlainJSONString reports whether encoding/json (HTML not escaped) writes s as it is: printable
// ASCII without quote or backslash.
func isPlainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// pollQuery holds the query parameters brokerapi reads for last_operation.
type pollQuery struct{ operation, planID, serviceID string }

// maxPlainQuery bounds the queries parsePollQuery splits itself: far below url.ParseQuery's
// limit on the number of parameters.
const maxPlainQuery = 2048

// parsePollQuery reads operation, plan_id and service_id as brokerapi's FormValue does (the
// first value of url.ParseQuery). A query without escapes or semicolons is split in place,
// which is what ParseQuery does with it; any other goes through ParseQuery.
func parsePollQuery(raw string) pollQuery {
	var q pollQuery
	if len(raw) > maxPlainQuery || strings.ContainsAny(raw, "%+;") {
		v, _ := url.ParseQuery(raw)
		return pollQuery{operation: v.Get("operation"), planID: v.Get("plan_id"), serviceID: v.Get("service_id")}
	}
	var seen [3]bool
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		key, value, _ := strings.Cut(pair, "=")
		var i int
		var into *string
		switch key {
		case "operation":
			i, into = 0, &q.operation
		case "plan_id":
			i, into = 1, &q.planID
		case "service_id":
			i, into = 2, &q.serviceID
		default:
			continue
		}
		if !seen[i] {
			seen[i], *into = true, value
		}
	}
	return q
}
