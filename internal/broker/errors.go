package broker

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/unavailable"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
	"github.com/sirupsen/logrus"
)

func badRequest(action, format string, args ...any) error {
	return apiresponses.NewFailureResponse(fmt.Errorf(format, args...), http.StatusBadRequest, action)
}

func notFound(action, format string, args ...any) error {
	return apiresponses.NewFailureResponse(fmt.Errorf(format, args...), http.StatusNotFound, action)
}

func unprocessable(action, format string, args ...any) error {
	return apiresponses.NewFailureResponse(fmt.Errorf(format, args...), http.StatusUnprocessableEntity, action)
}

// internal logs err and answers 500 without storage or client details, or 503 when the
// database cannot be reached: platforms retry on 503 (the router adds Retry-After).
func internal(log logrus.FieldLogger, action string, err error) error {
	if storage.IsFull(err) {
		// health.Storage logs the storage's state once; a line per request would add to it.
		log.WithError(err).WithField("action", action).Debug("request refused: storage full")
		return apiresponses.NewFailureResponse(errors.New(unavailable.FullMessage), http.StatusServiceUnavailable, action)
	}
	if storage.IsCanceled(err) {
		// The client went away or the request's deadline passed: not a server failure. The
		// answer goes nowhere, or the deadline's 503 went already.
		log.WithError(err).WithField("action", action).Info("request ended before its answer (client gone or deadline passed)")
		return apiresponses.NewFailureResponse(errors.New(unavailable.Message), http.StatusServiceUnavailable, action)
	}
	if storage.IsUnavailable(err) {
		log.WithError(err).WithField("action", action).Warn("request refused: database unavailable")
		return apiresponses.NewFailureResponse(errors.New(unavailable.Message), http.StatusServiceUnavailable, action)
	}
	log.WithError(err).WithField("action", action).Error("request failed")
	return apiresponses.NewFailureResponse(errors.New("internal error, see the broker's log"), http.StatusInternalServerError, action)
}
