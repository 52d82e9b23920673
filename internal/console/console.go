// Package console serves the operator console: a small front end (ES modules, Preact and htm
// vendored from npm as one file) embedded in the binary. It holds no data of its own: the
// browser calls the public operator API (/runtimes, /info/runtimes, /events, /orchestrations),
// so the API stays the single source and the console needs no access the API does not give.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// Path is where the broker mounts the console (behind the operator authentication).
const Path = "/console"

//go:embed assets
var embedded embed.FS

// Assets are the files served under Path/ (index.html, the app's modules, CSS, the vendored library).
func Assets() fs.FS {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic("console: the embedded assets directory is missing: " + err.Error()) // cannot happen: go:embed above
	}
	return sub
}

// Handler serves the console (the router admits only GET and HEAD): Path redirects to Path/, every file under it is an embedded
// asset, and any other path below it is the app (index.html; the app routes by the URL hash).
func Handler() http.Handler {
	assets := Assets()
	files := http.StripPrefix(Path+"/", http.FileServer(http.FS(assets)))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == Path {
			http.Redirect(w, req, Path+"/", http.StatusMovedPermanently)
			return
		}
		name := strings.TrimPrefix(req.URL.Path, Path+"/")
		if name != "" {
			if _, err := fs.Stat(assets, name); err != nil {
				http.NotFound(w, req)
				return
			}
		}
		// Assets change with the binary only; "no-cache" makes the browser revalidate each load.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		files.ServeHTTP(w, req)
	})
}
