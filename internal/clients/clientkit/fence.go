package clientkit

import (
	"fmt"
	"net/http"

	"github.com/kyma-project/kyma-environment-broker/internal/fence"
)

// fenced sends no request for an engine run whose operation's lease may have expired
// (fence.Check): another replica may run the operation by now, and a request from this one
// would act twice (a second service provider, a second secret). The failure is permanent for
// the call's retries; the engine does not judge the step by it but hands the operation back.
type fenced struct{ next http.RoundTripper }

func (f fenced) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := fence.Check(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, Permanent(fmt.Errorf("%s %s not sent: %w", req.Method, req.URL.Redacted(), err))
	}
	return f.next.RoundTrip(req)
}
