package apidoc_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/chromiumtest"
)

// TestSwaggerUILoads opens / in headless Chromium: Swagger UI loads its embedded assets,
// fetches /openapi.yaml and renders the document's title and every operation.
func TestSwaggerUILoads(t *testing.T) {
	b := bt.Start(t, bt.Options{NoEngine: true})
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumtest.Path(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	err := chromedp.Do(ctx,
		chromedp.Navigate(b.URL+"/"),
		chromedp.WaitVisible(`.swagger-ui .info .title`),
		chromedp.WaitVisible(`.opblock`),
	)
	require.NoError(t, err, "Swagger UI did not render in Chromium")
	title, err := chromedp.Run(ctx, chromedp.Text(`.swagger-ui .info .title`))
	require.NoError(t, err)
	operations, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.opblock').length`))
	require.NoError(t, err)
	failed, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('.swagger-ui .errors-wrapper') !== null`))
	require.NoError(t, err, "Swagger UI did not render in Chromium")
	assert.Contains(t, title, "Kyma Environment Broker")
	assert.Equal(t, len(documented(t)), operations, "every operation of the document is shown")
	assert.False(t, failed, "Swagger UI reports errors in the document")
}
