package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// DefaultMaxBodyBytes bounds request bodies when APIOptions.MaxBodyBytes is zero: the largest valid
// provisioning request (parameters, context, OIDC settings, module lists) is a few kilobytes.
const DefaultMaxBodyBytes = 1 << 20

// MaxIDLength bounds instance and binding IDs (GUIDs in practice): they become parts of names,
// labels and URLs in the external systems.
const MaxIDLength = 128

// osbGuard refuses what must never reach the handlers, before brokerapi reads anything: requests
// without a usable X-Broker-API-Version (412), instance or binding IDs that could not be used in a
// header, URL, name or label (400 naming the field), and bodies over the limit (413).
func osbGuard(maxBody int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := checkAPIVersion(req.Header.Get("X-Broker-API-Version")); err != nil {
			writeDescription(w, req, http.StatusPreconditionFailed, err.Error())
			return
		}
		if err := checkPathIDs(req.URL.Path); err != nil {
			writeDescription(w, req, http.StatusBadRequest, err.Error())
			return
		}
		if op := parsePollQuery(req.URL.RawQuery).operation; op != "" {
			if err := CheckID("operation", op); err != nil {
				writeDescription(w, req, http.StatusBadRequest, err.Error())
				return
			}
		}
		if !limitBody(w, req, maxBody) {
			return
		}
		next.ServeHTTP(w, req)
	})
}

// limitBody answers 413 for a declared length over max and makes reading past max fail; it
// reports whether the request may go on.
func limitBody(w http.ResponseWriter, req *http.Request, max int64) bool {
	if req.ContentLength > max {
		writeDescription(w, req, http.StatusRequestEntityTooLarge, tooLarge(max))
		return false
	}
	req.Body = http.MaxBytesReader(w, req.Body, max)
	return true
}

func tooLarge(max int64) string {
	return fmt.Sprintf("the request body is larger than %d bytes", max)
}

// checkAPIVersion is brokerapi's own rule (a 2.x version), answered with OSB's lower-case
// "description" field that brokerapi's middleware spells "Description".
func checkAPIVersion(v string) error {
	if isPlainVersion2(v) {
		return nil
	}
	if v == "" {
		return errors.New("X-Broker-API-Version header is not set")
	}
	var major, minor int
	if n, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil || n < 2 {
		return fmt.Errorf("X-Broker-API-Version header must be a version, got %q", truncate(v, 32))
	}
	if major != 2 {
		return fmt.Errorf("X-Broker-API-Version header must be 2.x, got %q", truncate(v, 32))
	}
	return nil
}

// isPlainVersion2 reports whether v is "2." and 1 to 18 digits, followed by nothing or by a
// character Sscanf's %d stops at and ignores: the form platforms send, which Sscanf accepts
// too. Sscanf (which decides every other value) cost more than the rest of a poll's checks.
func isPlainVersion2(v string) bool {
	if len(v) < 3 || v[0] != '2' || v[1] != '.' {
		return false
	}
	i := 2
	for i < len(v) && isDigit(v[i]) {
		i++
	}
	if digits := i - 2; digits < 1 || digits > 18 {
		return false
	}
	return i == len(v) || v[i] != '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// checkPathIDs checks the instance and binding IDs of an OSB path
// /v2/service_instances/{instance_id}[/service_bindings/{binding_id}][/last_operation]:
// each segment naming a kind is followed by its ID, up to the first segment that names none.
func checkPathIDs(path string) error {
	rest := strings.TrimPrefix(path, "/v2/")
	for {
		kind, after, ok := strings.Cut(rest, "/")
		if !ok {
			return nil
		}
		var field string
		switch kind {
		case "service_instances":
			field = "instance_id"
		case "service_bindings":
			field = "binding_id"
		default:
			return nil
		}
		id, next, more := strings.Cut(after, "/")
		if err := CheckID(field, id); err != nil {
			return err
		}
		if !more {
			return nil
		}
		rest = next
	}
}

// CheckID accepts 1 to MaxIDLength printable ASCII characters without spaces or the characters
// that change the meaning of a URL; the error names field.
func CheckID(field, id string) error {
	if id == "" {
		return fmt.Errorf("%s: must not be empty", field)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%s: must be at most %d characters, got %d", field, MaxIDLength, len(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"#%/<>?\^`+"`{|}", c) >= 0 {
			return fmt.Errorf("%s: must be printable ASCII without spaces or any of \"#%%/<>?\\^`{|}, got %q at position %d", field, rune(c), i)
		}
	}
	return nil
}

func writeDescription(w http.ResponseWriter, req *http.Request, status int, description string) {
	if id := req.Header.Get("X-Broker-API-Request-Identity"); id != "" {
		w.Header().Set("X-Broker-API-Request-Identity", id)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"description": description})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
