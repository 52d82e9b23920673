package runtimeagent

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
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
// at once when the CompassConnection is deleted or its spec changes.
type Controller struct {
	agent    *Agent
	cfg      Config
	core     kubernetes.Interface
	dyn      dynamic.Interface
	log      logrus.FieldLogger
	identity string
}

// NewController assembles the agent on the cluster of restCfg, talking to Compass.
func NewController(cfg Config, restCfg *rest.Config, compass interface {
	Connector
	Director
}, log logrus.FieldLogger) (*Controller, error) {
	core, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	if log == nil {
		log = logrus.New()
	}
	agent, err := NewAgent(cfg, Deps{Core: core, Dynamic: dyn, Connector: compass, Director: compass, Log: log})
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &Controller{agent: agent, cfg: agent.cfg, core: core, dyn: dyn, log: log, identity: host + "_" + uuid.NewString()}, nil
}

// Identity is the controller's name in the leader lock.
func (c *Controller) Identity() string { return c.identity }

// Agent is the controller's agent (for the revoke command and tests).
func (c *Controller) Agent() *Agent { return c.agent }

// Run campaigns for the leader lock and, while leading, runs the passes; it returns when ctx
// ends (releasing the lock) or when leadership is lost.
func (c *Controller) Run(ctx context.Context) error {
	if err := ensureNamespace(ctx, c.core, c.cfg.LeaderElectionNamespace); err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, c.cfg.LeaderElectionNamespace, c.cfg.LeaderElectionName,
		c.core.CoreV1(), c.core.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: c.identity})
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
				runErr = c.loop(ctx)
			},
			OnStoppedLeading: func() {
				c.log.WithField("identity", c.identity).Info("no longer leading")
				cancel() // a replica that lost the lock must stop acting
			},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the leader elector: %w", err)
	}
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
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())

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
