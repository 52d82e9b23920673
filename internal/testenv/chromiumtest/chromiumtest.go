// Package chromiumtest finds the headless Chromium that browser tests drive through chromedp.
package chromiumtest

import (
	"os"
	"os/exec"
	"testing"
)

// Path is the browser scripts/with-chromium.sh provides (KEB_CHROMIUM), else one on PATH; the
// test fails (never skips) without one.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KEB_CHROMIUM"); p != "" {
		return p
	}
	for _, c := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: run the tests through scripts/with-chromium.sh (make test), which installs it, or set KEB_CHROMIUM")
	return ""
}
