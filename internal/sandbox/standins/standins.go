// Package standins puts every external system's stand-in into one sandbox, with the credentials
// they accept, for cmd/sandbox, the broker's embedded default and tests.
package standins

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/avsstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/azurestandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/connectorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/directorstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/edpstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/iasstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/reconcilerstandin"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/smstandin"
	"github.com/sirupsen/logrus"
)

// Credentials are what the stand-ins accept; the zero value of a field takes its default.
type Credentials struct {
	AVSClientID, AVSClientSecret           string
	AVSUser, AVSPassword                   string
	EDPClientID, EDPClientSecret           string
	IASUser, IASPassword                   string
	SMClientID, SMClientSecret             string
	AzureClientID, AzureClientSecret       string
	DirectorClientID, DirectorClientSecret string
}

// DefaultCredentials are the sandbox's well-known credentials.
func DefaultCredentials() Credentials {
	return Credentials{
		AVSClientID: "sandbox-avs-client", AVSClientSecret: "sandbox-avs-secret",
		AVSUser: "sandbox-avs-user", AVSPassword: "sandbox-avs-password",
		EDPClientID: "sandbox-edp-client", EDPClientSecret: "sandbox-edp-secret",
		IASUser: "sandbox-ias-user", IASPassword: "sandbox-ias-password",
		SMClientID: "sandbox-sm-client", SMClientSecret: "sandbox-sm-secret",
		AzureClientID: "sandbox-azure-client", AzureClientSecret: "sandbox-azure-secret",
		DirectorClientID: "sandbox-director-client", DirectorClientSecret: "sandbox-director-secret",
	}
}

func (c Credentials) withDefaults() Credentials {
	d := DefaultCredentials()
	for _, f := range []struct{ v, def *string }{
		{&c.AVSClientID, &d.AVSClientID}, {&c.AVSClientSecret, &d.AVSClientSecret},
		{&c.AVSUser, &d.AVSUser}, {&c.AVSPassword, &d.AVSPassword},
		{&c.EDPClientID, &d.EDPClientID}, {&c.EDPClientSecret, &d.EDPClientSecret},
		{&c.IASUser, &d.IASUser}, {&c.IASPassword, &d.IASPassword},
		{&c.SMClientID, &d.SMClientID}, {&c.SMClientSecret, &d.SMClientSecret},
		{&c.AzureClientID, &d.AzureClientID}, {&c.AzureClientSecret, &d.AzureClientSecret},
		{&c.DirectorClientID, &d.DirectorClientID}, {&c.DirectorClientSecret, &d.DirectorClientSecret},
	} {
		if *f.v == "" {
			*f.v = *f.def
		}
	}
	return c
}

// Sandbox defaults shared with the clients' sandbox configuration.
const (
	AVSParentID  = 1000
	EDPNamespace = "kyma-dev"
	// TLSURL is where the TLS listener is assumed to be when Options.TLSURL is empty.
	TLSURL            = "https://127.0.0.1:8443"
	AzureSubscription = azurestandin.DefaultSubscriptionID
)

// Options configure the stand-ins' behaviour; zero durations make every asynchronous change
// happen at once.
type Options struct {
	Seed        uint64
	Log         logrus.FieldLogger
	Now         func() time.Time
	Credentials Credentials
	// AVSParentIDs exist from the start; {AVSParentID} when empty.
	AVSParentIDs []int64
	// EDPNamespaces exist; {EDPNamespace} when nil, any when empty but not nil.
	EDPNamespaces []string
	// ReconcileTime and DeleteTime pace the reconciler's statuses.
	ReconcileTime, ReconcileDeleteTime time.Duration
	// FailingComponents make the reconciler fail configurations that contain them.
	FailingComponents []string
	// RetryableComponents make the reconciler fail configurations that contain them, and the
	// deletion of their clusters, once retryably before its own retry succeeds.
	RetryableComponents []string
	// SMProvisionDelay is how long EMS instances stay "in progress".
	SMProvisionDelay time.Duration
	// AzureActivationTime and AzureDeletionTime pace Event Hubs namespaces and resource groups.
	AzureActivationTime, AzureDeletionTime time.Duration
	// AzureLongRunning, AzureLongRunningPolls, AzureLongRunningTime and AzureRetryAfter shape the
	// namespace creations ARM answers 202 Accepted (azurestandin.Options).
	AzureLongRunning      string
	AzureLongRunningPolls int
	AzureLongRunningTime  time.Duration
	AzureRetryAfter       time.Duration
	// Admin are the credentials the /_sandbox/ endpoints require (none without a password).
	Admin sandbox.AdminConfig
	// Store keeps the stand-ins' state, so that they answer as before after a restart; in memory
	// when nil.
	Store durable.Store
	// TLSURL is the base URL (https://host:port) of the TLS listener serving the Connector and the
	// endpoints secured by mutual TLS: the Director's one-time tokens and the Connector's
	// management plane info point there. TLSURL (the constant) when empty; Listen sets it.
	TLSURL string
	// Timeouts bound the listeners' connections (Listen); the broker passes its own listener's.
	Timeouts Timeouts
	// ClaimWait is how long Listen waits for another sandbox serving from Store (a durable.Claimer)
	// to give it up, such as a killed predecessor whose connection the database has not yet
	// dropped; DefaultClaimWait when zero.
	ClaimWait time.Duration
}

// DefaultClaimWait is how long Listen waits by default for another sandbox to give up the store.
const DefaultClaimWait = 30 * time.Second

// ErrStoreClaimed is Listen's error when another sandbox keeps serving from the store.
var ErrStoreClaimed = errors.New("another sandbox serves from this database (a broker replica with an embedded sandbox, or cmd/sandbox): " +
	"replicas share one sandbox, run cmd/sandbox and point every replica at it with APP_SANDBOX_URL")

// Timeouts bound a listener's connections: reading the headers, reading a whole request, and
// waiting idle between requests. Zero fields take DefaultTimeouts().
type Timeouts struct {
	ReadHeader, Read, Idle time.Duration
}

// DefaultTimeouts are the broker listener's defaults (APP_HTTP_READ_HEADER_TIMEOUT,
// APP_HTTP_READ_TIMEOUT, APP_HTTP_IDLE_TIMEOUT).
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Idle: 2 * time.Minute}
}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	if t.ReadHeader <= 0 {
		t.ReadHeader = d.ReadHeader
	}
	if t.Read <= 0 {
		t.Read = d.Read
	}
	if t.Idle <= 0 {
		t.Idle = d.Idle
	}
	return t
}

// Systems are the stand-ins in one sandbox, with those the TLS listener needs.
type Systems struct {
	Sandbox   *sandbox.Sandbox
	Connector *connectorstandin.StandIn
	Director  *directorstandin.StandIn
	// TLSURL is the base URL the Connector's URLs are built on.
	TLSURL string
}

// ConnectorURL is the Connector's token-secured endpoint, which one-time tokens point at.
func (s Systems) ConnectorURL() string { return ConnectorURL(s.TLSURL) }

// ConnectorURL is the Connector's token-secured endpoint on the TLS listener at base.
func ConnectorURL(base string) string {
	return strings.TrimRight(base, "/") + "/" + connectorstandin.Name + connectorstandin.TokenSecuredPath
}

// CertificateSecuredConnectorURL is the Connector's certificate-secured endpoint at base.
func CertificateSecuredConnectorURL(base string) string {
	return strings.TrimRight(base, "/") + "/" + connectorstandin.Name + connectorstandin.CertificateSecuredPath
}

// DirectorURL is the Director's GraphQL endpoint at base, which accepts runtimes' certificates
// on the TLS listener.
func DirectorURL(base string) string {
	return strings.TrimRight(base, "/") + "/" + directorstandin.Name + "/graphql"
}

// New returns a sandbox with every stand-in registered, its state loaded from o.Store.
func New(o Options) (*sandbox.Sandbox, error) { return Open(context.Background(), o) }

// Open is New loading the state within ctx.
func Open(ctx context.Context, o Options) (*sandbox.Sandbox, error) {
	sys, err := OpenSystems(ctx, o)
	return sys.Sandbox, err
}

// OpenSystems is Open returning the stand-ins the TLS listener needs too.
func OpenSystems(ctx context.Context, o Options) (Systems, error) {
	if o.TLSURL == "" {
		o.TLSURL = TLSURL
	}
	c := o.Credentials.withDefaults()
	parents := o.AVSParentIDs
	if len(parents) == 0 {
		parents = []int64{AVSParentID}
	}
	namespaces := o.EDPNamespaces
	if namespaces == nil {
		namespaces = []string{EDPNamespace}
	}
	store := o.Store
	if store == nil {
		store = durable.NewMemoryStore()
	}
	sb := sandbox.New(sandbox.Options{Seed: o.Seed, Log: o.Log, Now: o.Now, Admin: o.Admin})
	out := Systems{Sandbox: sb, TLSURL: o.TLSURL}
	for _, open := range []func() (sandbox.System, error){
		func() (sandbox.System, error) {
			return avsstandin.Open(ctx, avsstandin.Options{ClientID: c.AVSClientID, ClientSecret: c.AVSClientSecret, Username: c.AVSUser, Password: c.AVSPassword, ParentIDs: parents, Now: o.Now, Store: store})
		},
		func() (sandbox.System, error) {
			return edpstandin.Open(ctx, edpstandin.Options{ClientID: c.EDPClientID, ClientSecret: c.EDPClientSecret, Namespaces: namespaces, Now: o.Now, Store: store})
		},
		func() (sandbox.System, error) {
			return iasstandin.Open(ctx, iasstandin.Options{User: c.IASUser, Password: c.IASPassword, Store: store})
		},
		func() (sandbox.System, error) {
			return smstandin.Open(ctx, smstandin.Options{ClientID: c.SMClientID, ClientSecret: c.SMClientSecret,
				ProvisionDelay: o.SMProvisionDelay, Now: o.Now, Store: store})
		},
		func() (sandbox.System, error) {
			return azurestandin.Open(ctx, azurestandin.Options{ClientID: c.AzureClientID, ClientSecret: c.AzureClientSecret,
				ActivationTime: o.AzureActivationTime, DeletionTime: o.AzureDeletionTime, LongRunning: o.AzureLongRunning,
				LongRunningPolls: o.AzureLongRunningPolls, LongRunningTime: o.AzureLongRunningTime, RetryAfter: o.AzureRetryAfter,
				Now: o.Now, Store: store})
		},
		func() (sandbox.System, error) {
			return reconcilerstandin.Open(ctx, reconcilerstandin.Options{ReconcileTime: o.ReconcileTime, DeleteTime: o.ReconcileDeleteTime,
				FailingComponents: o.FailingComponents, RetryableComponents: o.RetryableComponents, Now: o.Now, Store: store})
		},
		func() (sandbox.System, error) {
			var err error
			out.Director, err = directorstandin.Open(ctx, directorstandin.Options{ClientID: c.DirectorClientID, ClientSecret: c.DirectorClientSecret,
				ConnectorURL: ConnectorURL(o.TLSURL), Now: o.Now, Store: store})
			return out.Director, err
		},
		func() (sandbox.System, error) {
			var err error
			// The Connector uses up the one-time tokens the Director issued: their state is the Director's.
			out.Connector, err = connectorstandin.Open(ctx, connectorstandin.Options{Tokens: out.Director, DirectorURL: DirectorURL(o.TLSURL),
				CertificateSecuredURL: CertificateSecuredConnectorURL(o.TLSURL), Now: o.Now, Store: store})
			return out.Connector, err
		},
	} {
		sys, err := open()
		if err != nil {
			return Systems{}, err
		}
		if err := sb.Register(sys); err != nil {
			return Systems{}, err
		}
	}
	return out, nil
}
