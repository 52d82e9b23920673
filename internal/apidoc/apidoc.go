// Package apidoc serves the broker's API description: the OpenAPI 3 document at /openapi.yaml
// (embedded, checked against the router by a test) and Swagger UI for it at / (the assets of
// github.com/swaggest/swgui, embedded in the binary).
package apidoc

import (
	_ "embed"
	"net/http"

	"github.com/swaggest/swgui"
	"github.com/swaggest/swgui/v5emb"
)

//go:embed openapi.yaml
var document []byte

// DocumentPath is where the document is served.
const DocumentPath = "/openapi.yaml"

// Document is the OpenAPI 3 document (YAML).
func Document() []byte { return append([]byte(nil), document...) }

// Handler serves the document at DocumentPath and Swagger UI with its assets under /.
func Handler() http.Handler {
	ui := v5emb.NewWithConfig(swgui.Config{Title: "Kyma Environment Broker", SwaggerJSON: DocumentPath, BasePath: "/", HideCurl: false})("", "", "")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == DocumentPath {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(document)
			return
		}
		ui.ServeHTTP(w, r)
	})
}
