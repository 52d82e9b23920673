package console_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
)

// TestServedBehindTheOperatorAuthentication checks the console's mount in the broker's router:
// the operator credentials are needed, the assets are the embedded ones, nothing else is served.
func TestServedBehindTheOperatorAuthentication(t *testing.T) {
	b := bt.Start(t, bt.Options{NoEngine: true, NoSandbox: true})
	b.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	assert.Equal(t, http.StatusUnauthorized, b.Get("/console/", bt.WithoutAuth()).Status)
	assert.Equal(t, http.StatusUnauthorized, b.Get("/console/app.js", bt.WithoutAuth()).Status)
	assert.Equal(t, http.StatusUnauthorized, b.Get("/console/", bt.WithBasicAuth(bt.Username, "wrong")).Status)

	page := b.Get("/console/")
	assert.Equal(t, http.StatusOK, page.Status)
	assert.Contains(t, page.Header.Get("Content-Type"), "text/html")
	assert.Contains(t, string(page.Body), `<script type="module" src="app.js">`)
	assert.Contains(t, page.Header.Get("Content-Security-Policy"), "default-src 'self'", "no request leaves the broker's origin")

	js := b.Get("/console/vendor/preact-htm.js")
	assert.Equal(t, http.StatusOK, js.Status)
	assert.Contains(t, js.Header.Get("Content-Type"), "javascript")

	redirect := b.Get("/console")
	assert.Equal(t, http.StatusMovedPermanently, redirect.Status)
	assert.Equal(t, "/console/", redirect.Header.Get("Location"))

	assert.Equal(t, http.StatusNotFound, b.Get("/console/nope.js").Status)
	assert.Equal(t, http.StatusMethodNotAllowed, b.Do(http.MethodPost, "/console/", nil).Status)
}
