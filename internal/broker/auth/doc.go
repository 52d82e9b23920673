// Package auth holds the broker's HTTP authentication middlewares: HTTP basic
// auth for /v2, bearer JWTs verified in-process against an OIDC issuer's JWKS
// for /oauth/... and for the operator endpoints, and Either to accept one or
// the other on the same route.
//
// Every middleware is a plain func(http.Handler) http.Handler, so it can be
// used with gorilla/mux (router.Use or subrouter.Use) or wrap a handler
// directly.
//
// Failures answer with one generic body per status and never say which part
// of the credentials was wrong:
//
//	401 {"description":"unauthorized"}  missing, malformed, wrong, expired credentials
//	403 {"description":"forbidden"}     a valid token lacking the scope or group
//
// The real reason is logged at debug level (logrus field "reason").
package auth
