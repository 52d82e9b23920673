package azurestandin

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

type oauthError struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// serveToken checks the scope as Microsoft Entra ID does for the client-credentials grant (one
// "<resource>/.default" scope) and leaves the rest to the sandbox's TokenIssuer.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	// ParseForm keeps the parsed form, so the issuer's own ParseForm sees the same values.
	if err := r.ParseForm(); err == nil && r.PostForm.Get("grant_type") == "client_credentials" {
		scope := strings.TrimSpace(r.PostForm.Get("scope"))
		switch {
		case scope == "":
			s.countEvents("token", "token.rejected")
			sandbox.WriteJSONCharset(w, http.StatusBadRequest, oauthError{Error: "invalid_request",
				ErrorDescription: "AADSTS900144: The request body must contain the following parameter: 'scope'."})
			return
		case strings.ContainsAny(scope, " \t") || !strings.HasSuffix(scope, "/.default") || scope == "/.default":
			s.countEvents("token", "token.rejected")
			sandbox.WriteJSONCharset(w, http.StatusBadRequest, oauthError{Error: "invalid_scope",
				ErrorDescription: fmt.Sprintf("AADSTS1002012: The provided value for scope %s is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).", scope)})
			return
		}
	}
	s.issuer.ServeToken(w, r)
}
