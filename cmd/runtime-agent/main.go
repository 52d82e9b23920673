// Command runtime-agent is the Runtime Agent (seed 003): it runs in a runtime's cluster,
// connects it to Compass with the one-time token of its configuration Secret, renews its client
// certificate and synchronises the Applications the Director assigns to the runtime.
//
//	runtime-agent          run the controller (configuration: APP_* variables)
//	runtime-agent revoke   revoke the agent's current client certificate and exit
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
	"github.com/sirupsen/logrus"
)

func main() {
	if observe.IsVersionArg(os.Args[1:]) {
		observe.PrintVersion(os.Stdout, "runtime-agent")
		return
	}
	cmd := "run"
	if len(os.Args) > 1 {
		cmd = os.Args[1]
	}
	switch cmd {
	case "-h", "--help", "-help", "help":
		// Before any configuration is read: help needs no cluster.
		fmt.Fprint(os.Stdout, usage)
		return
	}
	logging.Main("runtime agent", func(ctx context.Context, log *logrus.Logger) error { return run(ctx, cmd, log) })
}

func run(ctx context.Context, cmd string, log *logrus.Logger) error {
	cfg, err := runtimeagent.LoadConfig()
	if err != nil {
		return err
	}
	restCfg, err := runtimeagent.RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	compass, err := runtimeagent.NewCompass(cfg.ConnectorCAFile, cfg.CallTimeout)
	if err != nil {
		return err
	}
	ctrl, err := runtimeagent.NewController(cfg, restCfg, compass, log.WithField("component", "runtime-agent"))
	if err != nil {
		return err
	}
	switch cmd {
	case "run":
	case "revoke":
		if err := ctrl.Agent().Revoke(ctx); err != nil {
			return err
		}
		log.Info("revoked the client certificate: it stays valid until it expires but is never renewed")
		return nil
	default:
		return fmt.Errorf("unknown command %q (run, revoke)", cmd)
	}
	if cfg.HealthAddress != "" {
		srv := &http.Server{Addr: cfg.HealthAddress, ReadHeaderTimeout: 5 * time.Second, Handler: ctrl.Handler()}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.WithError(err).Error("health endpoint failed")
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	log.WithFields(runtimeagent.StartupFields(cfg)).Info("starting the runtime agent")
	return ctrl.Run(ctx)
}

// usage is --help's text.
const usage = `runtime-agent: the Runtime Agent; it runs in a runtime's cluster, connects it to Compass
with the one-time token of its configuration Secret, renews its client certificate and
synchronises the Applications the Director assigns to the runtime.

Usage:
  runtime-agent            run the controller (configuration: APP_* variables, see
                           docs/user/runtime-agent.md; in-cluster, or APP_KUBECONFIG)
  runtime-agent revoke     revoke the agent's current client certificate and exit
  runtime-agent version    print the version and commit (also --version)
  runtime-agent --help     this text
`
