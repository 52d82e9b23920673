package azurestandin

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

type armError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers as ARM does: {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	sandbox.WriteJSONCharset(w, status, map[string]armError{"error": {Code: code, Message: fmt.Sprintf(format, args...)}})
}

type kind int

const (
	kindGroup kind = iota + 1
	kindNamespace
	kindListKeys
	kindOperationStatus
	kindOperationResult
)

// route is an ARM request path taken apart: /subscriptions/{sub}/resourcegroups/{group}
// [/providers/Microsoft.EventHub/namespaces/{namespace}[/authorizationRules/{rule}/listKeys]].
type route struct {
	kind                                 kind
	subscription, group, namespace, rule string
	// location and operation name an operation: /subscriptions/{sub}/providers/Microsoft.EventHub/
	// locations/{location}/operationStatuses|operationResults/{operation}.
	location, operation string
}

// parseRoute matches the fixed segments case-insensitively, as ARM does.
func parseRoute(r *http.Request) (route, bool) {
	raw := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil || u == "" {
			return route{}, false
		}
		segs[i] = u
	}
	is := func(i int, want string) bool { return strings.EqualFold(segs[i], want) }
	if len(segs) == 8 && is(0, "subscriptions") && is(2, "providers") && is(3, "Microsoft.EventHub") && is(4, "locations") {
		rt := route{subscription: segs[1], location: segs[5], operation: segs[7]}
		switch {
		case is(6, "operationStatuses"):
			rt.kind = kindOperationStatus
		case is(6, "operationResults"):
			rt.kind = kindOperationResult
		default:
			return route{}, false
		}
		return rt, true
	}
	if len(segs) < 4 || !is(0, "subscriptions") || !is(2, "resourcegroups") {
		return route{}, false
	}
	rt := route{subscription: segs[1], group: segs[3]}
	switch {
	case len(segs) == 4:
		rt.kind = kindGroup
	case len(segs) >= 8 && is(4, "providers") && is(5, "Microsoft.EventHub") && is(6, "namespaces"):
		rt.namespace = segs[7]
		switch {
		case len(segs) == 8:
			rt.kind = kindNamespace
		case len(segs) == 11 && is(8, "authorizationRules") && is(10, "listKeys"):
			rt.kind, rt.rule = kindListKeys, segs[9]
		default:
			return route{}, false
		}
	default:
		return route{}, false
	}
	return rt, true
}

// serveARM checks the token, the api-version and the subscription, in that order, and dispatches.
func (s *Server) serveARM(w http.ResponseWriter, r *http.Request) {
	if !s.issuer.Authorized(r) {
		s.countEvents("unauthorized")
		w.Header().Set("WWW-Authenticate", `Bearer authorization_uri="https://login.microsoftonline.com/common", error="invalid_token"`)
		if r.Header.Get("Authorization") == "" {
			writeError(w, http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
		} else {
			writeError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid or has expired.")
		}
		return
	}
	rt, ok := parseRoute(r)
	if !ok {
		writeError(w, http.StatusNotFound, "InvalidResourceType", "The sandbox serves no resource type at '%s'.", r.URL.Path)
		return
	}
	want := EventHubAPIVersion
	if rt.kind == kindGroup {
		want = ResourceGroupsAPIVersion
	}
	switch v := r.URL.Query().Get("api-version"); {
	case v == "":
		writeError(w, http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
		return
	case v != want:
		writeError(w, http.StatusBadRequest, "InvalidApiVersionParameter", "The api-version '%s' is invalid. The supported versions are '%s'.", v, want)
		return
	}
	if !strings.EqualFold(rt.subscription, s.opts.SubscriptionID) {
		writeError(w, http.StatusNotFound, "SubscriptionNotFound", "The subscription '%s' could not be found.", rt.subscription)
		return
	}
	var body []byte
	if r.Method == http.MethodPut {
		var err error
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20)); err != nil {
			writeError(w, http.StatusBadRequest, "InvalidRequestContent", "The request content could not be read: %v.", err)
			return
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	switch {
	case rt.kind == kindGroup && r.Method == http.MethodGet:
		s.getGroup(w, rt)
	case rt.kind == kindGroup && r.Method == http.MethodPut:
		s.putGroup(w, rt, body)
	case rt.kind == kindGroup && r.Method == http.MethodDelete:
		s.deleteGroup(w, rt)
	case rt.kind == kindNamespace && r.Method == http.MethodGet:
		s.getNamespace(w, rt)
	case rt.kind == kindNamespace && r.Method == http.MethodPut:
		s.putNamespace(w, rt, body, armBase(r))
	case (rt.kind == kindOperationStatus || rt.kind == kindOperationResult) && r.Method == http.MethodGet:
		s.serveOperation(w, rt, armBase(r))
	case rt.kind == kindListKeys && r.Method == http.MethodPost:
		s.listKeys(w, rt)
	default:
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "The sandbox does not support %s on '%s'.", r.Method, r.URL.Path)
	}
}
