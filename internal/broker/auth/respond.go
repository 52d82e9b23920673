package auth

import (
	"net/http"

	"github.com/sirupsen/logrus"
)

// Realm is the realm announced in WWW-Authenticate challenges.
const Realm = "kyma-environment-broker"

const (
	bodyUnauthorized = `{"description":"unauthorized"}`
	bodyForbidden    = `{"description":"forbidden"}`
)

func writeJSON(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// unauthorized answers 401 with the given challenge scheme ("Basic"/"Bearer").
func unauthorized(w http.ResponseWriter, scheme string) {
	w.Header().Set("WWW-Authenticate", scheme+` realm="`+Realm+`"`)
	writeJSON(w, http.StatusUnauthorized, bodyUnauthorized)
}

func forbidden(w http.ResponseWriter) {
	writeJSON(w, http.StatusForbidden, bodyForbidden)
}

func logDenied(log logrus.FieldLogger, r *http.Request, status int, reason string, err error) {
	entry := log.WithFields(logrus.Fields{
		"component": "auth",
		"method":    r.Method,
		"path":      r.URL.Path,
		"remote":    r.RemoteAddr,
		"status":    status,
		"reason":    reason,
	})
	if err != nil {
		entry = entry.WithError(err)
	}
	entry.Debug("request denied")
}
