// Command sandbox serves the stand-ins for the broker's external systems (AVS, EDP, IAS so far) on
// APP_SANDBOX_ADDRESS, with inspection and fault injection under /_sandbox/. See docs/user/sandbox.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	avsstandin "github.com/kyma-project/kyma-environment-broker/internal/sandbox/avs"
	edpstandin "github.com/kyma-project/kyma-environment-broker/internal/sandbox/edp"
	iasstandin "github.com/kyma-project/kyma-environment-broker/internal/sandbox/ias"
	"github.com/sirupsen/logrus"
)

// config is read from APP_SANDBOX_*; flags override it.
type config struct {
	Address         string `envconfig:"ADDRESS" default:"127.0.0.1:8090"`
	AVSClientID     string `envconfig:"AVS_CLIENT_ID" default:"sandbox-avs-client"`
	AVSClientSecret string `envconfig:"AVS_CLIENT_SECRET" default:"sandbox-avs-secret"`
	AVSParentIDs    string `envconfig:"AVS_PARENT_IDS" default:"1000"`
	EDPClientID     string `envconfig:"EDP_CLIENT_ID" default:"sandbox-edp-client"`
	EDPClientSecret string `envconfig:"EDP_CLIENT_SECRET" default:"sandbox-edp-secret"`
	// EDPNamespaces that exist (comma-separated; empty: any).
	EDPNamespaces string `envconfig:"EDP_NAMESPACES" default:"kyma-dev"`
	IASUser       string `envconfig:"IAS_USER" default:"sandbox-ias-user"`
	IASPassword   string `envconfig:"IAS_PASSWORD" default:"sandbox-ias-password"`
}

func main() {
	log := logrus.New()
	log.SetFormatter(&logrus.JSONFormatter{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], log, nil); err != nil {
		log.WithError(err).Error("sandbox failed")
		stop()
		os.Exit(1)
	}
}

// faultFlags registers -<system>-error-rate, -latency, -outage-from and -outage-until.
func faultFlags(fs *flag.FlagSet, system string) func() (sandbox.Faults, error) {
	rate := fs.Float64(system+"-error-rate", 0, "fraction of "+system+" requests answered with 503/500, in [0,1]")
	latency := fs.Duration(system+"-latency", 0, "delay before every "+system+" request is handled")
	from := fs.String(system+"-outage-from", "", "RFC3339 start of a "+system+" outage (503 to every request)")
	until := fs.String(system+"-outage-until", "", "RFC3339 end of a "+system+" outage")
	return func() (sandbox.Faults, error) {
		f := sandbox.Faults{ErrorRate: *rate, Latency: *latency}
		for _, t := range []struct {
			name, val string
			dst       *time.Time
		}{{"outage-from", *from, &f.OutageFrom}, {"outage-until", *until, &f.OutageUntil}} {
			if t.val == "" {
				continue
			}
			v, err := time.Parse(time.RFC3339, t.val)
			if err != nil {
				return f, fmt.Errorf("-%s-%s: %w", system, t.name, err)
			}
			*t.dst = v
		}
		if err := f.Validate(); err != nil {
			return f, fmt.Errorf("%s faults: %w", system, err)
		}
		return f, nil
	}
}

func parseIDs(s string) ([]int64, error) {
	var ids []int64
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("invalid evaluation id %q", p)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// run serves until ctx ends; ready, when not nil, receives the listening address.
func run(ctx context.Context, args []string, log *logrus.Logger, ready func(net.Addr)) error {
	var cfg config
	if err := envconfig.Process("APP_SANDBOX", &cfg); err != nil {
		return fmt.Errorf("reading configuration: %w", err)
	}
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.StringVar(&cfg.Address, "address", cfg.Address, "listen address (APP_SANDBOX_ADDRESS)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the random source deciding which requests get injected errors")
	fs.StringVar(&cfg.AVSClientID, "avs-client-id", cfg.AVSClientID, "client id the AVS token endpoint accepts (APP_SANDBOX_AVS_CLIENT_ID)")
	fs.StringVar(&cfg.AVSClientSecret, "avs-client-secret", cfg.AVSClientSecret, "client secret the AVS token endpoint accepts (APP_SANDBOX_AVS_CLIENT_SECRET)")
	fs.StringVar(&cfg.AVSParentIDs, "avs-parent-ids", cfg.AVSParentIDs, "comma-separated ids of AVS parent evaluations that always exist (APP_SANDBOX_AVS_PARENT_IDS)")
	avsFaults := faultFlags(fs, avsstandin.Name)
	fs.StringVar(&cfg.EDPClientID, "edp-client-id", cfg.EDPClientID, "client id the EDP token endpoint accepts (APP_SANDBOX_EDP_CLIENT_ID)")
	fs.StringVar(&cfg.EDPClientSecret, "edp-client-secret", cfg.EDPClientSecret, "client secret the EDP token endpoint accepts (APP_SANDBOX_EDP_CLIENT_SECRET)")
	fs.StringVar(&cfg.EDPNamespaces, "edp-namespaces", cfg.EDPNamespaces, "comma-separated EDP namespaces that exist; empty: any (APP_SANDBOX_EDP_NAMESPACES)")
	edpFaults := faultFlags(fs, edpstandin.Name)
	fs.StringVar(&cfg.IASUser, "ias-user", cfg.IASUser, "basic-auth user the IAS stand-in accepts (APP_SANDBOX_IAS_USER)")
	fs.StringVar(&cfg.IASPassword, "ias-password", cfg.IASPassword, "basic-auth password the IAS stand-in accepts (APP_SANDBOX_IAS_PASSWORD)")
	iasFaults := faultFlags(fs, iasstandin.Name)
	if err := fs.Parse(args); err != nil {
		return err
	}
	parents, err := parseIDs(cfg.AVSParentIDs)
	if err != nil {
		return fmt.Errorf("-avs-parent-ids: %w", err)
	}
	faults, err := avsFaults()
	if err != nil {
		return err
	}
	edpFaultCfg, err := edpFaults()
	if err != nil {
		return err
	}
	iasFaultCfg, err := iasFaults()
	if err != nil {
		return err
	}

	sb := sandbox.New(sandbox.Options{Seed: *seed, Log: log})
	if err := sb.Register(avsstandin.New(avsstandin.Options{
		ClientID: cfg.AVSClientID, ClientSecret: cfg.AVSClientSecret, ParentIDs: parents,
	})); err != nil {
		return err
	}
	if err := sb.SetFaults(avsstandin.Name, faults); err != nil {
		return err
	}
	if err := sb.Register(edpstandin.New(edpstandin.Options{
		ClientID: cfg.EDPClientID, ClientSecret: cfg.EDPClientSecret, Namespaces: splitList(cfg.EDPNamespaces),
	})); err != nil {
		return err
	}
	if err := sb.SetFaults(edpstandin.Name, edpFaultCfg); err != nil {
		return err
	}
	if err := sb.Register(iasstandin.New(iasstandin.Options{User: cfg.IASUser, Password: cfg.IASPassword})); err != nil {
		return err
	}
	if err := sb.SetFaults(iasstandin.Name, iasFaultCfg); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Address, err)
	}
	srv := &http.Server{Handler: sb, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.WithFields(logrus.Fields{"address": ln.Addr().String(), "systems": sb.Systems(), "seed": *seed}).Info("sandbox listening")
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("sandbox stopped")
	return nil
}

// splitList splits a comma-separated list, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
