package runtimeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/connector"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// RESTConfig is the kubeconfig file's configuration, or the in-cluster one when path is empty.
func RESTConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("reading the in-cluster configuration (set APP_KUBECONFIG outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// Controller runs the agent as the leader of its replicas: a pass at every sync period, and
// at once when the CompassConnection is deleted or its spec changes or a new token is written
// to the configuration Secret.
type Controller struct {
	agent    *Agent
	cfg      Config
	core     kubernetes.Interface // the agent's, gated by leadership
	dyn      dynamic.Interface
	election kubernetes.Interface // the leader election's own, never gated
	log      logrus.FieldLogger
	identity string
	elector  atomic.Pointer[leaderelection.LeaderElector]
	leading  atomic.Bool
}

// errNotLeading refuses the agent's writes while the replica cannot be sure it holds the lock.
var errNotLeading = errors.New("not acting: this replica cannot be sure it still holds the leader lock")

// mayAct tells whether the replica may act: it leads, and renewed the lock within the renew
// deadline (client-go's elector only notices a lost lock when its renewal gives up, which after
// a pause such as SIGSTOP is seconds after another replica took over).
func (c *Controller) mayAct() error {
	le := c.elector.Load()
	if le == nil {
		return nil // not campaigning: the agent is used directly (revoke, benchmarks)
	}
	if !c.leading.Load() || !le.IsLeader() {
		return errNotLeading
	}
	// Check fails once the last observed renewal is older than the lease duration plus the
	// tolerance: a negative tolerance makes that the renew deadline.
	if err := le.Check(c.cfg.RenewDeadline - c.cfg.LeaseDuration); err != nil {
		return fmt.Errorf("%w: %v", errNotLeading, err)
	}
	return nil
}

// gate is the agent's Kubernetes transport: writes only while mayAct, and every call but a
// watch bounded by timeout.
type gate struct {
	next    http.RoundTripper
	mayAct  func() error
	timeout time.Duration
}

func (g gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		if err := g.mayAct(); err != nil {
			return nil, err
		}
	}
	if req.URL.Query().Get("watch") == "true" || g.timeout <= 0 {
		return g.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), g.timeout)
	resp, err := g.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// guardedCompass calls Compass only while the replica may act: a call with effects (a token
// spent, a certificate signed, a label set) from a replica that lost the lock is refused.
type guardedCompass struct {
	next interface {
		Connector
		Director
	}
	mayAct func() error
}

func (g guardedCompass) Configuration(ctx context.Context, url, token string) (connector.Configuration, error) {
	if err := g.mayAct(); err != nil {
		return connector.Configuration{}, err
	}
	return g.next.Configuration(ctx, url, token)
}

func (g guardedCompass) SignCSR(ctx context.Context, url, token string, csrPEM []byte) (connector.Certificates, error) {
	if err := g.mayAct(); err != nil {
		return connector.Certificates{}, err
	}
	return g.next.SignCSR(ctx, url, token, csrPEM)
}

func (g guardedCompass) CertificateConfiguration(ctx context.Context, url string, creds ClientCredentials) (connector.Configuration, error) {
	if err := g.mayAct(); err != nil {
		return connector.Configuration{}, err
	}
	return g.next.CertificateConfiguration(ctx, url, creds)
}

func (g guardedCompass) RenewCertificate(ctx context.Context, url string, creds ClientCredentials, csrPEM []byte) (connector.Certificates, error) {
	if err := g.mayAct(); err != nil {
		return connector.Certificates{}, err
	}
	return g.next.RenewCertificate(ctx, url, creds, csrPEM)
}

func (g guardedCompass) RevokeCertificate(ctx context.Context, url string, creds ClientCredentials) error {
	if err := g.mayAct(); err != nil {
		return err
	}
	return g.next.RevokeCertificate(ctx, url, creds)
}

func (g guardedCompass) ApplicationsForRuntime(ctx context.Context, url, tenant, runtimeID string, creds ClientCredentials) ([]DirectorApplication, error) {
	if err := g.mayAct(); err != nil {
		return nil, err
	}
	return g.next.ApplicationsForRuntime(ctx, url, tenant, runtimeID, creds)
}

func (g guardedCompass) SetRuntimeLabel(ctx context.Context, url, tenant, runtimeID, key, value string, creds ClientCredentials) error {
	if err := g.mayAct(); err != nil {
		return err
	}
	return g.next.SetRuntimeLabel(ctx, url, tenant, runtimeID, key, value, creds)
}

func (g guardedCompass) SetRuntimeStatusCondition(ctx context.Context, url, tenant, runtimeID, condition string, creds ClientCredentials) error {
	if err := g.mayAct(); err != nil {
		return err
	}
	return g.next.SetRuntimeStatusCondition(ctx, url, tenant, runtimeID, condition, creds)
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// NewController assembles the agent on the cluster of restCfg, talking to Compass.
func NewController(cfg Config, restCfg *rest.Config, compass interface {
	Connector
	Director
}, log logrus.FieldLogger) (*Controller, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, log: log}
	electionCfg := rest.CopyConfig(restCfg)
	election, err := kubernetes.NewForConfig(electionCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader election's Kubernetes client: %w", err)
	}
	agentCfg := rest.CopyConfig(restCfg)
	agentCfg.QPS, agentCfg.Burst = cfg.KubeQPS, cfg.KubeBurst
	agentCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return gate{next: rt, mayAct: c.mayAct, timeout: cfg.CallTimeout}
	})
	core, err := kubernetes.NewForConfig(agentCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(agentCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	if c.log == nil {
		c.log = logrus.New()
	}
	// Events are recorded through the election's client: a replica that stops leading may
	// still say so.
	events, stop := newRecorder(election)
	g := guardedCompass{next: compass, mayAct: c.mayAct}
	agent, err := NewAgent(cfg, Deps{Core: core, Dynamic: dyn, Connector: g, Director: g, Log: c.log, Events: events})
	if err != nil {
		stop()
		return nil, err
	}
	agent.stopEvents = stop
	host, _ := os.Hostname()
	c.agent, c.core, c.dyn, c.election, c.identity = agent, core, dyn, election, host+"_"+uuid.NewString()
	return c, nil
}

// Identity is the controller's name in the leader lock.
func (c *Controller) Identity() string { return c.identity }

// Agent is the controller's agent (for the revoke command and tests).
func (c *Controller) Agent() *Agent { return c.agent }

// Run campaigns for the leader lock and, while leading, runs the passes; it returns when ctx
// ends (releasing the lock) or when leadership is lost.
func (c *Controller) Run(ctx context.Context) error {
	if err := ensureNamespace(ctx, c.election, c.cfg.LeaderElectionNamespace); err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, c.cfg.LeaderElectionNamespace, c.cfg.LeaderElectionName,
		c.election.CoreV1(), c.election.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: c.identity})
	if err != nil {
		return fmt.Errorf("creating the leader lock: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runErr error
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: c.cfg.LeaderElectionName,
		LeaseDuration: c.cfg.LeaseDuration, RenewDeadline: c.cfg.RenewDeadline, RetryPeriod: c.cfg.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				c.log.WithField("identity", c.identity).Info("leading: the agent acts")
				c.leading.Store(true)
				runErr = c.loop(ctx)
				// However the loop ended, this replica no longer acts: it must not hold the
				// lock either (cancelling releases it).
				c.leading.Store(false)
				cancel()
			},
			OnStoppedLeading: func() {
				c.leading.Store(false)
				c.log.WithField("identity", c.identity).Info("no longer leading")
				cancel() // a replica that lost the lock must stop acting
			},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the leader elector: %w", err)
	}
	c.elector.Store(le)
	defer c.agent.Close()
	le.Run(ctx)
	return runErr
}

// loop runs passes until ctx ends.
func (c *Controller) loop(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dyn, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.cfg.ConnectionName).String()
	})
	informer := factory.ForResource(CompassConnectionGVR).Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(any) { signal() }, // the seed's "Reconnect": connect again from the Secret
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetGeneration() != n.GetGeneration() {
				signal() // a spec change (refreshCredentialsNow, resyncNow)
			}
		},
	}); err != nil {
		return fmt.Errorf("watching the CompassConnection: %w", err)
	}
	// A new token in the configuration Secret is tried at once, not after the backoff.
	cfgSecret := c.agent.configSecret
	secrets := informers.NewSharedInformerFactoryWithOptions(c.core, 0, informers.WithNamespace(cfgSecret.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfgSecret.Name).String()
		}))
	tokenChanged := func(oldObj, newObj any) {
		o, ok1 := oldObj.(*corev1.Secret)
		n, ok2 := newObj.(*corev1.Secret)
		if !ok1 || !ok2 || string(o.Data["TOKEN"]) != string(n.Data["TOKEN"]) {
			signal()
		}
	}
	if _, err := secrets.Core().V1().Secrets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tokenChanged(nil, obj) },
		UpdateFunc: tokenChanged,
	}); err != nil {
		return fmt.Errorf("watching the configuration Secret: %w", err)
	}
	factory.Start(ctx.Done())
	secrets.Start(ctx.Done())
	defer factory.Shutdown()
	defer secrets.Shutdown()
	factory.WaitForCacheSync(ctx.Done())
	secrets.WaitForCacheSync(ctx.Done())
	if err := c.agent.startCaches(ctx); err != nil {
		return err
	}

	// Stop acting as soon as the lock may be lost, without waiting for the elector's renewal
	// to give up: passes and their calls to Compass end with ctx.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(max(c.cfg.RetryPeriod/4, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := c.mayAct(); err != nil {
					c.log.WithError(err).Warn("stopping: the leader lock was not renewed in time")
					cancel()
					return
				}
			}
		}
	}()

	for {
		next := c.agent.Reconcile(ctx)
		timer := time.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// Ready says whether the runtime is connected, from the CompassConnection every replica reads
// alike: ready in every state but ConnectionFailed (or none yet), as in all of them the agent
// holds a certificate that works, unless the status says a new one-time token is needed (a
// revoked certificate: it works until it expires, and nothing but a new token renews it).
func (c *Controller) Ready(ctx context.Context) error {
	conn, err := c.agent.getConnection(ctx)
	switch {
	case err != nil:
		return err
	case conn == nil:
		return errors.New("not connected: no CompassConnection yet")
	case conn.Status.State == "" || conn.Status.State == ConnectionFailed:
		msg := ""
		if conn.Status.ConnectionStatus != nil {
			msg = ": " + conn.Status.ConnectionStatus.Error
		}
		return fmt.Errorf("not connected: %s%s", orNone(conn.Status.State), msg)
	case conn.Status.ConnectionStatus != nil && strings.Contains(conn.Status.ConnectionStatus.Error, NewTokenNeeded):
		// Revoked: connected until the certificate expires, but only a new token keeps it.
		return fmt.Errorf("losing the connection: %s: %s", conn.Status.State, conn.Status.ConnectionStatus.Error)
	}
	return nil
}

// Handler serves /healthz (the process runs), /readyz (Ready) and /metrics.
func (c *Controller) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	m.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := c.Ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	m.Handle("GET /metrics", promhttp.HandlerFor(c.agent.metrics.Registry, promhttp.HandlerOpts{}))
	return m
}
