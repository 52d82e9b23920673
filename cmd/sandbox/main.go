// Command sandbox serves the stand-ins for the broker's external systems (AVS, EDP, IAS, Service
// Manager, Azure, Reconciler, Director, Connector) on APP_SANDBOX_ADDRESS (plain HTTP) and
// APP_SANDBOX_TLS_ADDRESS (TLS with a certificate of the sandbox CA, for the Connector and the
// runtimes' mutual-TLS endpoints), with inspection and fault injection under /_sandbox/. The stand-ins keep their
// state in a SQLite file of their own (-db, APP_SANDBOX_DB), so a restarted sandbox answers as
// before. See docs/user/sandbox.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	"github.com/kyma-project/kyma-environment-broker/internal/observe"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durablesql"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/sirupsen/logrus"
)

// config is read from APP_SANDBOX_*; flags override it. Empty credentials take the sandbox's
// well-known defaults (internal/sandbox/standins).
type config struct {
	Address              string `envconfig:"ADDRESS" default:"127.0.0.1:8090"`
	TLSAddress           string `envconfig:"TLS_ADDRESS" default:"127.0.0.1:8443"`
	DB                   string `envconfig:"DB" default:"sandbox.db"`
	AVSClientID          string `envconfig:"AVS_CLIENT_ID"`
	AVSClientSecret      string `envconfig:"AVS_CLIENT_SECRET"`
	AVSUser              string `envconfig:"AVS_USER"`
	AVSPassword          string `envconfig:"AVS_PASSWORD"`
	AVSParentIDs         string `envconfig:"AVS_PARENT_IDS" default:"1000"`
	EDPClientID          string `envconfig:"EDP_CLIENT_ID"`
	EDPClientSecret      string `envconfig:"EDP_CLIENT_SECRET"`
	EDPNamespaces        string `envconfig:"EDP_NAMESPACES" default:"kyma-dev"`
	IASUser              string `envconfig:"IAS_USER"`
	IASPassword          string `envconfig:"IAS_PASSWORD"`
	SMClientID           string `envconfig:"SM_CLIENT_ID"`
	SMClientSecret       string `envconfig:"SM_CLIENT_SECRET"`
	AzureClientID        string `envconfig:"AZURE_CLIENT_ID"`
	AzureClientSecret    string `envconfig:"AZURE_CLIENT_SECRET"`
	DirectorClientID     string `envconfig:"DIRECTOR_CLIENT_ID"`
	DirectorClientSecret string `envconfig:"DIRECTOR_CLIENT_SECRET"`
	// The /_sandbox/ endpoints' credentials (APP_SANDBOX_ADMIN_*), required beyond loopback.
	AdminUsername string `envconfig:"ADMIN_USERNAME" default:"sandbox"`
	AdminPassword string `envconfig:"ADMIN_PASSWORD"`
}

func main() {
	if observe.IsVersionArg(os.Args[1:]) {
		observe.PrintVersion(os.Stdout, "sandbox")
		return
	}
	log, err := logging.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
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
	lost := fs.Float64(system+"-lost-response-rate", 0, "fraction of "+system+" requests handled but answered with 502, in [0,1]")
	latency := fs.Duration(system+"-latency", 0, "delay before every "+system+" request is handled")
	from := fs.String(system+"-outage-from", "", "RFC3339 start of a "+system+" outage (503 to every request)")
	until := fs.String(system+"-outage-until", "", "RFC3339 end of a "+system+" outage")
	return func() (sandbox.Faults, error) {
		f := sandbox.Faults{ErrorRate: *rate, LostResponseRate: *lost, Latency: *latency}
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

// run serves until ctx ends; ready, when not nil, receives the listeners.
func run(ctx context.Context, args []string, log *logrus.Logger, ready func(*standins.Listeners)) error {
	var cfg config
	if err := envconfig.Process("APP_SANDBOX", &cfg); err != nil {
		return fmt.Errorf("reading configuration: %w", err)
	}
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.StringVar(&cfg.Address, "address", cfg.Address, "listen address (APP_SANDBOX_ADDRESS)")
	fs.StringVar(&cfg.TLSAddress, "tls-address", cfg.TLSAddress, "TLS listen address for the Connector and mutual-TLS endpoints (APP_SANDBOX_TLS_ADDRESS)")
	fs.StringVar(&cfg.DB, "db", cfg.DB, "SQLite file keeping the stand-ins' state, created when missing (APP_SANDBOX_DB)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the random source deciding which requests get injected errors")
	for _, c := range []struct {
		name string
		dst  *string
	}{
		{"avs-client-id", &cfg.AVSClientID}, {"avs-client-secret", &cfg.AVSClientSecret}, {"avs-parent-ids", &cfg.AVSParentIDs},
		{"avs-user", &cfg.AVSUser}, {"avs-password", &cfg.AVSPassword},
		{"edp-client-id", &cfg.EDPClientID}, {"edp-client-secret", &cfg.EDPClientSecret}, {"edp-namespaces", &cfg.EDPNamespaces},
		{"ias-user", &cfg.IASUser}, {"ias-password", &cfg.IASPassword},
		{"sm-client-id", &cfg.SMClientID}, {"sm-client-secret", &cfg.SMClientSecret},
		{"azure-client-id", &cfg.AzureClientID}, {"azure-client-secret", &cfg.AzureClientSecret},
		{"director-client-id", &cfg.DirectorClientID}, {"director-client-secret", &cfg.DirectorClientSecret},
	} {
		env := "APP_SANDBOX_" + strings.ToUpper(strings.ReplaceAll(c.name, "-", "_"))
		fs.StringVar(c.dst, c.name, *c.dst, c.name+" ("+env+")")
	}
	var o standins.Options
	fs.DurationVar(&o.ReconcileTime, "reconcile-time", 0, "how long the reconciler keeps a cluster in each of reconcile_pending and reconciling")
	fs.DurationVar(&o.ReconcileDeleteTime, "reconcile-delete-time", 0, "the same for delete_pending and deleting")
	failing := fs.String("reconcile-failing-components", "", "comma-separated components whose cluster configurations end in error")
	fs.DurationVar(&o.SMProvisionDelay, "sm-provision-delay", 0, "how long Service Manager instances stay in progress")
	fs.DurationVar(&o.AzureActivationTime, "azure-activation-time", 0, "how long Event Hubs namespaces stay Activating")
	fs.DurationVar(&o.AzureDeletionTime, "azure-deletion-time", 0, "how long resource groups stay Deleting")
	fs.StringVar(&o.AzureLongRunning, "azure-long-running", azurestandin.LongRunningSome,
		"which Event Hubs namespace creations ARM answers 202 Accepted: "+strings.Join(azurestandin.LongRunningModes(), ", "))
	fs.IntVar(&o.AzureLongRunningPolls, "azure-long-running-polls", 2, "how many reads find a long-running creation InProgress")
	fs.DurationVar(&o.AzureRetryAfter, "azure-retry-after", 10*time.Second, "the Retry-After of long-running answers")
	// The stand-ins' names, for the per-system fault flags.
	systems := []string{"avs", "edp", "ias", "servicemanager", "azure", "reconciler", "director", "connector"}
	faultsOf := map[string]func() (sandbox.Faults, error){}
	for _, sys := range systems {
		faultsOf[sys] = faultFlags(fs, sys)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	parents, err := parseIDs(cfg.AVSParentIDs)
	if err != nil {
		return fmt.Errorf("-avs-parent-ids: %w", err)
	}
	o.Seed, o.Log, o.AVSParentIDs, o.FailingComponents = *seed, log, parents, splitList(*failing)
	o.Admin = sandbox.AdminConfig{Username: cfg.AdminUsername, Password: cfg.AdminPassword}
	o.EDPNamespaces = splitList(cfg.EDPNamespaces)
	if o.EDPNamespaces == nil {
		o.EDPNamespaces = []string{} // empty: any namespace exists
	}
	o.Credentials = standins.Credentials{
		AVSClientID: cfg.AVSClientID, AVSClientSecret: cfg.AVSClientSecret, AVSUser: cfg.AVSUser, AVSPassword: cfg.AVSPassword, EDPClientID: cfg.EDPClientID, EDPClientSecret: cfg.EDPClientSecret,
		IASUser: cfg.IASUser, IASPassword: cfg.IASPassword, SMClientID: cfg.SMClientID, SMClientSecret: cfg.SMClientSecret,
		AzureClientID: cfg.AzureClientID, AzureClientSecret: cfg.AzureClientSecret,
		DirectorClientID: cfg.DirectorClientID, DirectorClientSecret: cfg.DirectorClientSecret,
	}
	faults := map[string]sandbox.Faults{}
	for _, sys := range systems {
		if faults[sys], err = faultsOf[sys](); err != nil {
			return err
		}
	}
	objects, err := durablesql.OpenFile(ctx, cfg.DB, log)
	if err != nil {
		return fmt.Errorf("opening the sandbox database -db %s: %w", cfg.DB, err)
	}
	defer func() {
		if err := objects.Close(); err != nil {
			log.WithError(err).Error("closing the sandbox database")
		}
	}()
	o.Store = objects
	l, err := standins.Listen(ctx, o, cfg.Address, cfg.TLSAddress)
	if err != nil {
		return err
	}
	for _, sys := range systems {
		if err := l.Sandbox.SetFaults(sys, faults[sys]); err != nil {
			_ = l.Shutdown(ctx)
			return err
		}
	}
	log.WithFields(logrus.Fields{"address": l.URL, "tlsAddress": l.TLSURL, "connector": l.ConnectorURL(), "systems": l.Sandbox.Systems(),
		"seed": *seed, "db": cfg.DB}).Info("sandbox listening; the sandbox CA is at " + l.URL + "/_sandbox/connector/ca.pem")
	if ready != nil {
		ready(l)
	}
	select {
	case err := <-l.Err():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Shutdown(shutdownCtx)
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Shutdown(shutdownCtx); err != nil {
		return err
	}
	for range 2 {
		if err := <-l.Err(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
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
