package runtimeagent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// caches are informers over the agent's own Applications and credential Secrets, so that a
// pass compares with memory and only writes what differs instead of reading every resource.
type caches struct {
	apps    cache.GenericLister
	secrets cache.Indexer
	stop    context.CancelFunc
}

// StartCaches starts the informers and waits for their first listing; they stop with ctx. The
// controller starts them; an agent without them reads from the API server.
func (a *Agent) StartCaches(ctx context.Context) error { return a.startCaches(ctx) }

func (a *Agent) startCaches(ctx context.Context) error {
	if a.caches != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	own := func(o *metav1.ListOptions) { o.LabelSelector = labels.Set{labelManagedBy: managedByAgent}.String() }
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.dyn, 0, metav1.NamespaceAll, own)
	apps := df.ForResource(ApplicationGVR)
	sf := informers.NewSharedInformerFactoryWithOptions(a.core, 0, informers.WithNamespace(a.cfg.CredentialsNamespace), informers.WithTweakListOptions(own))
	secrets := sf.Core().V1().Secrets().Informer()
	df.Start(ctx.Done())
	sf.Start(ctx.Done())
	for gvr, ok := range df.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return fmt.Errorf("listing %s for the cache: %w", gvr.Resource, context.Cause(ctx))
		}
	}
	for typ, ok := range sf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return fmt.Errorf("listing %v for the cache: %w", typ, context.Cause(ctx))
		}
	}
	a.caches = &caches{apps: apps.Lister(), secrets: secrets.GetIndexer(), stop: cancel}
	return nil
}

// ownApplications are the runtime's Applications by name, from the cache or the API server.
func (a *Agent) ownApplications(ctx context.Context, own labels.Set) (map[string]Application, []error, error) {
	var items []*unstructured.Unstructured
	if a.caches != nil {
		objs, err := a.caches.apps.List(labels.SelectorFromSet(own))
		if err != nil {
			return nil, nil, fmt.Errorf("listing Applications from the cache: %w", err)
		}
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				items = append(items, u)
			}
		}
	} else {
		list, err := a.dyn.Resource(ApplicationGVR).List(ctx, metav1.ListOptions{LabelSelector: own.String()})
		if err != nil {
			return nil, nil, fmt.Errorf("listing Applications: %w", err)
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
	}
	have := map[string]Application{}
	var errs []error
	for _, u := range items {
		var app Application
		if err := fromUnstructured(u, &app); err != nil {
			errs = append(errs, err)
			continue
		}
		have[app.Name] = app
	}
	return have, errs, nil
}

// ownSecrets are the runtime's credential Secrets by name, from the cache or the API server.
func (a *Agent) ownSecrets(ctx context.Context, own labels.Set) (map[string]*corev1.Secret, error) {
	out := map[string]*corev1.Secret{}
	if a.caches != nil {
		err := cache.ListAll(a.caches.secrets, labels.SelectorFromSet(own), func(o any) {
			if s, ok := o.(*corev1.Secret); ok {
				out[s.Name] = s
			}
		})
		return out, err
	}
	list, err := a.core.CoreV1().Secrets(a.cfg.CredentialsNamespace).List(ctx, metav1.ListOptions{LabelSelector: own.String()})
	if err != nil {
		return nil, fmt.Errorf("listing credential Secrets: %w", err)
	}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}
