package console_test

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
)

// The console opened as http://user:pw@host/console/ showed "Request cannot be constructed from
// a URL that includes credentials" next to "0 runtimes": its API calls resolved against the
// page's URL, credentials included. They are built on the origin now.
func TestConsoleOpenedWithCredentialsInTheURL(t *testing.T) {
	b := bt.Start(t, bt.Options{})
	id := uuid.NewString()
	b.WaitSucceeded(id, b.Provision(id, "rt-creds", "ga-creds"))

	br := newBrowser(t, b)
	u, err := url.Parse(b.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(bt.Username, bt.Password)
	br.do(chromedp.Navigate(u.String() + "#/runtimes"))
	br.waitJS(`document.querySelectorAll('table.runtimes tbody tr').length === 1`)
	assert.Equal(t, id, eval[string](br, `document.querySelector('table.runtimes tbody tr').dataset.instance`))
	assert.NotContains(t, eval[string](br, `document.body.innerText`), "cannot be constructed")
}
