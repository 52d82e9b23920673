package sandbox

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// AdminConfig are the credentials the /_sandbox/ endpoints (inspection, fault injection, reset)
// require (APP_SANDBOX_ADMIN_*). Without a password they are open, which Check allows on loopback
// only.
type AdminConfig struct {
	Username string `envconfig:"SANDBOX_ADMIN_USERNAME" default:"sandbox"`
	Password string `envconfig:"SANDBOX_ADMIN_PASSWORD"`
}

// Enabled says whether the admin endpoints require credentials.
func (c AdminConfig) Enabled() bool { return c.Password != "" }

// Check refuses open admin endpoints on a listen address other hosts reach: whoever reaches
// them can inject faults into and reset every stand-in.
func (c AdminConfig) Check(addresses ...string) error {
	if c.Enabled() {
		return nil
	}
	for _, addr := range addresses {
		if !loopback(addr) {
			return fmt.Errorf("the sandbox listens on %s, beyond loopback, and its /_sandbox/ endpoints (fault injection, reset) need credentials: set APP_SANDBOX_ADMIN_PASSWORD (and APP_SANDBOX_ADMIN_USERNAME, default sandbox)", addr)
		}
	}
	return nil
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// publicAdmin are the admin paths anyone may read: the sandbox CA's certificate, which runtimes
// need to trust the TLS listener.
var publicAdmin = map[string]bool{"/_sandbox/connector/ca.pem": true}

// authorized answers 401 and returns false when credentials are required and r lacks them.
func (c AdminConfig) authorized(w http.ResponseWriter, r *http.Request) bool {
	if !c.Enabled() || (r.Method == http.MethodGet && publicAdmin[r.URL.Path]) {
		return true
	}
	user, password, ok := r.BasicAuth()
	if ok && subtle.ConstantTimeCompare([]byte(user), []byte(c.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(password), []byte(c.Password)) == 1 {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="sandbox admin"`)
	WriteJSON(w, http.StatusUnauthorized, errorBody{Message: "the /_sandbox/ endpoints need the APP_SANDBOX_ADMIN_USERNAME and APP_SANDBOX_ADMIN_PASSWORD credentials"})
	return false
}
