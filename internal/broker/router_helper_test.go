package broker

import (
	"net/http"

	"github.com/gorilla/mux"
	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
	"github.com/sirupsen/logrus"
)

// testRouter serves the OSB API as the process's router (internal/app) mounts it: request log
// and Retry-After around the routes, last_operation polls answered before them unless
// fastLastOperation is false (then they take the router and brokerapi like every other request,
// the reference the fast path is compared with).
func testRouter(b *Broker, v2 Middleware, log logrus.FieldLogger, fastLastOperation bool) http.Handler {
	api := NewAPI(b, APIOptions{V2Auth: v2, OAuthAuth: v2}, log)
	if !fastLastOperation {
		api.lastOp = nil
	}
	r := mux.NewRouter()
	r.Use(RequestLog(log), unavailable.WithRetryAfter)
	api.Mount(r)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !api.AnswerPoll(w, req) {
			r.ServeHTTP(w, req)
		}
	})
}
