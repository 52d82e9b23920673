// Package modulemanager installs the modules a Kyma resource enables, the part of Kyma's
// lifecycle-manager this system needs: it watches Kyma resources, resolves each module of
// spec.modules to its ModuleTemplate (through the ModuleReleaseMeta, as lifecycle-manager does),
// pulls the module's artifact from its registry, verifies its signature with the configured
// public keys, applies the raw manifest and the default custom resource with server-side apply,
// and reports status.modules[] and status.state. A module removed from spec.modules is deleted
// (its custom resource only when the manager created it, per customResourcePolicy).
package modulemanager

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/client-go/util/workqueue"
)

// Module and Kyma states (lifecycle-manager's shared.State).
const (
	StateReady      = "Ready"
	StateProcessing = "Processing"
	StateError      = "Error"
	StateDeleting   = "Deleting"
	// StateUnmanaged: the entry has managed: false; the manager leaves the module alone.
	StateUnmanaged = "Unmanaged"
	StateWarning   = "Warning"
)

// Finalizer keeps a Kyma resource until its modules are removed.
const Finalizer = "operator.kyma-project.io/module-manager"

// DefaultCRNamespace is where a namespaced default CR without a namespace goes (lifecycle-manager
// installs modules into kyma-system).
const DefaultCRNamespace = "kyma-system"

// Config configures a manager.
type Config struct {
	// Namespace limits the Kyma resources watched ("" for all).
	Namespace string
	// PublicKeys verify modules: a module is installed only if one of its signatures verifies
	// with one of them.
	PublicKeys []*rsa.PublicKey
	// RegistrySecret is NAMESPACE/NAME of a Secret with registry credentials (a docker config,
	// or username and password keys); "" for none.
	RegistrySecret string
	// DockerConfig (a docker config JSON: auths by registry host) has the registry credentials
	// when no RegistrySecret is named: a manager outside the cluster (the provisioner) keeps
	// them out of the runtimes. Never logged.
	DockerConfig []byte
	// PlainHTTPRegistries are registry hosts reached over plain HTTP (a base URL with http://
	// is too).
	PlainHTTPRegistries []string
	// CAFile is a PEM CA certificate to trust for registries' TLS.
	CAFile string
	// Resync re-reconciles every Kyma resource this often (default 30s); Processing modules are
	// looked at again after Requeue (default 1s).
	Resync, Requeue time.Duration
	// Workers reconcile Kyma resources in parallel (default 2).
	Workers int
	// FieldManager of server-side apply (default module-manager).
	FieldManager string
	// DefaultNamespace receives the namespaced objects (manifest and default CR) that name no
	// namespace [DefaultCRNamespace, as lifecycle-manager]; a runtime confined to a namespace
	// of a shared host names its own.
	DefaultNamespace string
	Log              logrus.FieldLogger
}

func (c *Config) plainHTTP(host string) bool {
	for _, h := range c.PlainHTTPRegistries {
		if h == host {
			return true
		}
	}
	return false
}

// Manager reconciles Kyma resources.
type Manager struct {
	cfg     Config
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	applier *applier
	source  *source
	log     logrus.FieldLogger
}

// New makes a manager for a cluster.
func New(rc *rest.Config, cfg Config) (*Manager, error) {
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Requeue <= 0 {
		cfg.Requeue = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.FieldManager == "" {
		cfg.FieldManager = ManagedBy
	}
	if cfg.DefaultNamespace == "" {
		cfg.DefaultNamespace = DefaultCRNamespace
	}
	if cfg.Log == nil {
		cfg.Log = logrus.New()
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	m := &Manager{cfg: cfg, dyn: dyn, kube: kube, log: cfg.Log}
	m.applier = newApplier(dyn, kube.Discovery(), cfg.FieldManager)
	m.source = newSource(&m.cfg, kube)
	return m, nil
}

// Run watches Kyma resources and reconciles them until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	m.log.WithFields(logrus.Fields{"namespace": m.cfg.Namespace, "keys": keyFingerprints(m.cfg.PublicKeys)}).Info("module manager starting")
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(m.dyn, m.cfg.Resync, m.cfg.Namespace, nil)
	informer := factory.ForResource(module.KymaGVR).Informer()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("watch Kyma resources: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("watch Kyma resources: %w", ctx.Err())
	}
	done := make(chan struct{})
	for i := 0; i < m.cfg.Workers; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				requeue, err := m.Reconcile(ctx, key)
				switch {
				case err != nil:
					m.log.WithError(err).WithField("kyma", key).Warn("reconcile")
					queue.AddRateLimited(key)
				case requeue:
					queue.Forget(key)
					queue.AddAfter(key, m.cfg.Requeue)
				default:
					queue.Forget(key)
				}
				queue.Done(key)
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	for i := 0; i < m.cfg.Workers; i++ {
		<-done
	}
	factory.Shutdown()
	return nil
}

// moduleStatus is an entry of the Kyma resource's status.modules.
type moduleStatus = map[string]any

// Reconcile brings one Kyma resource (key NAMESPACE/NAME) to its spec; it reports whether to look
// again soon (a module still Processing or Deleting).
func (m *Manager) Reconcile(ctx context.Context, key string) (bool, error) {
	ns, name, _ := strings.Cut(key, "/")
	client := m.dyn.Resource(module.KymaGVR).Namespace(ns)
	kyma, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get Kyma %s: %w", key, err)
	}
	log := m.log.WithField("kyma", key)
	deleting := kyma.GetDeletionTimestamp() != nil
	if !deleting && !hasFinalizer(kyma) {
		kyma.SetFinalizers(append(kyma.GetFinalizers(), Finalizer))
		if kyma, err = client.Update(ctx, kyma, metav1.UpdateOptions{FieldManager: m.cfg.FieldManager}); err != nil {
			return false, fmt.Errorf("add finalizer to Kyma %s: %w", key, err)
		}
	}

	old := map[string]moduleStatus{}
	oldList, _, _ := unstructured.NestedSlice(kyma.Object, "status", "modules")
	for _, it := range oldList {
		if s, ok := it.(map[string]any); ok {
			if n, _ := s["name"].(string); n != "" {
				old[n] = s
			}
		}
	}
	var statuses []any
	desired := map[string]bool{}
	// Entries with managed: false are the user's: their modules are neither applied nor removed
	// (what was installed stays, as with lifecycle-manager), not even when the Kyma resource is
	// deleted.
	entries, unmanaged := specModules(kyma)
	if !deleting {
		for _, entry := range entries {
			mname, _ := entry["name"].(string)
			desired[mname] = true
			if unmanaged[mname] {
				st := moduleStatus{"name": mname, "state": StateUnmanaged}
				if o := old[mname]; o != nil {
					for _, k := range []string{"channel", "version", "fqdn", "template"} {
						if v, ok := o[k]; ok {
							st[k] = v
						}
					}
				}
				statuses = append(statuses, st)
				continue
			}
			st := m.reconcileModule(ctx, kyma, entry, log.WithField("module", mname))
			statuses = append(statuses, st)
		}
	}
	// Modules no longer desired (or all, when the Kyma resource is deleted): remove them. The
	// inventories find modules whose status was never written (a manager killed mid-way).
	inventories, err := m.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy + "," + LabelKyma + "=" + name})
	if err != nil {
		return false, fmt.Errorf("list inventories of Kyma %s: %w", key, err)
	}
	gone := map[string]bool{}
	for n := range old {
		if !desired[n] && !unmanaged[n] {
			gone[n] = true
		}
	}
	for i := range inventories.Items {
		if n := inventories.Items[i].Labels[LabelModule]; n != "" && !desired[n] && !unmanaged[n] {
			gone[n] = true
		}
	}
	for _, n := range sortedKeys(gone) {
		done, err := m.removeModule(ctx, ns, name, n)
		if done && err == nil {
			continue
		}
		st := moduleStatus{"name": n, "state": StateDeleting}
		if o := old[n]; o != nil {
			for _, k := range []string{"channel", "version", "fqdn", "template"} {
				if v, ok := o[k]; ok {
					st[k] = v
				}
			}
		}
		if err != nil {
			st["state"] = StateError
			st["message"] = "removing the module: " + err.Error()
		}
		statuses = append(statuses, st)
	}

	requeue := false
	for _, it := range statuses {
		s := it.(moduleStatus)["state"]
		if s == StateProcessing || s == StateDeleting {
			requeue = true
		}
	}
	if deleting && len(statuses) == 0 {
		return false, m.removeFinalizer(ctx, client, kyma)
	}
	return requeue, m.writeStatus(ctx, client, kyma, statuses)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

func hasFinalizer(obj *unstructured.Unstructured) bool {
	for _, f := range obj.GetFinalizers() {
		if f == Finalizer {
			return true
		}
	}
	return false
}

func (m *Manager) removeFinalizer(ctx context.Context, client dynamic.ResourceInterface, kyma *unstructured.Unstructured) error {
	var keep []string
	for _, f := range kyma.GetFinalizers() {
		if f != Finalizer {
			keep = append(keep, f)
		}
	}
	kyma.SetFinalizers(keep)
	_, err := client.Update(ctx, kyma, metav1.UpdateOptions{FieldManager: m.cfg.FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer of Kyma %s/%s: %w", kyma.GetNamespace(), kyma.GetName(), err)
	}
	return nil
}

// KymaState is lifecycle-manager's Kyma.DetermineState over the modules: Error if any is Error,
// else Warning if any is, else Processing if any is (or Deleting), else Ready.
func KymaState(statuses []any) string {
	seen := map[string]bool{}
	for _, it := range statuses {
		if s, ok := it.(moduleStatus); ok {
			st, _ := s["state"].(string)
			seen[st] = true
		}
	}
	switch {
	case seen[StateError]:
		return StateError
	case seen[StateWarning]:
		return StateWarning
	case seen[StateProcessing], seen[StateDeleting]:
		return StateProcessing
	}
	return StateReady
}

func (m *Manager) writeStatus(ctx context.Context, client dynamic.ResourceInterface, kyma *unstructured.Unstructured, statuses []any) error {
	if statuses == nil {
		statuses = []any{}
	}
	status, _, _ := unstructured.NestedMap(kyma.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	before := runtime.DeepCopyJSONValue(status)
	status["modules"] = runtime.DeepCopyJSONValue(statuses)
	status["state"] = KymaState(statuses)
	status["activeChannel"] = module.KymaChannel(kyma)
	if reflect.DeepEqual(before, any(status)) {
		return nil
	}
	kyma.Object["status"] = status
	_, err := client.UpdateStatus(ctx, kyma, metav1.UpdateOptions{FieldManager: m.cfg.FieldManager})
	if err != nil {
		return fmt.Errorf("update status of Kyma %s/%s: %w", kyma.GetNamespace(), kyma.GetName(), err)
	}
	return nil
}

// reconcileModule installs (or upgrades) one module and says how it is.
func (m *Manager) reconcileModule(ctx context.Context, kyma *unstructured.Unstructured, entry map[string]any, log logrus.FieldLogger) moduleStatus {
	name, _ := entry["name"].(string)
	channel, _ := entry["channel"].(string)
	if channel == "" {
		channel = module.KymaChannel(kyma)
	}
	policy, _ := entry["customResourcePolicy"].(string)
	if policy == "" {
		policy = module.PolicyCreateAndDel
	}
	st := moduleStatus{"name": name, "channel": channel}
	fail := func(state string, err error) moduleStatus {
		st["state"] = state
		st["message"] = err.Error()
		if state == StateError {
			log.WithError(err).Warn("module")
		}
		return st
	}
	ns := kyma.GetNamespace()
	r, err := module.Resolve(ctx, m.dyn, ns, name, channel)
	if err != nil {
		return fail(StateError, err)
	}
	st["template"] = map[string]any{
		"apiVersion": module.OperatorAPIVersion, "kind": module.KindModuleTemplate,
		"metadata": map[string]any{"name": r.Template.GetName(), "namespace": r.Template.GetNamespace(), "generation": r.Template.GetGeneration()},
	}
	cd, err := module.DescriptorFromTemplate(r.Template)
	if err != nil {
		return fail(StateError, err)
	}
	st["version"] = cd.Component.Version
	st["fqdn"] = cd.Component.Name
	art, err := m.source.artifact(ctx, cd)
	if err != nil {
		return fail(StateError, err)
	}
	objs, err := manifestObjects(art)
	if err != nil {
		return fail(StateError, err)
	}
	var cr *unstructured.Unstructured
	if data, ok, _ := unstructured.NestedMap(r.Template.Object, "spec", "data"); ok && policy == module.PolicyCreateAndDel {
		cr = &unstructured.Unstructured{Object: data}
	}

	// Record everything this pass may create before creating it (and keep the previous version's
	// objects until they are pruned), so a manager killed mid-way leaves nothing untracked.
	kymaName := kyma.GetName()
	prev, err := m.readInventory(ctx, ns, kymaName, name)
	if err != nil {
		return fail(StateError, err)
	}
	inv := &Inventory{Module: name, Version: cd.Component.Version, Channel: channel, Policy: policy}
	for _, o := range objs {
		setLabels(o, kymaName, name)
		if o.GetNamespace() == "" {
			// Recorded where it is applied, so it can be pruned (a kind not known yet is
			// resolved when applied; its CRD comes with the module).
			if _, namespaced, err := m.applier.resource(o.GroupVersionKind(), ""); err == nil && namespaced {
				o.SetNamespace(m.cfg.DefaultNamespace)
			}
		}
		inv.Objects = append(inv.Objects, refOf(o))
	}
	pending := *inv
	if prev != nil {
		pending.Objects = unionRefs(prev.Objects, inv.Objects)
		pending.CR = prev.CR
	}
	if cr != nil {
		setLabels(cr, kymaName, name)
		ref := refOf(cr)
		if ref.Namespace == "" {
			ref.Namespace = m.cfg.DefaultNamespace
		}
		inv.CR = &ref
		if pending.CR == nil {
			pending.CR = &ref
		}
	}
	if prev == nil || !reflect.DeepEqual(*prev, pending) {
		if err := m.writeInventory(ctx, ns, kymaName, &pending); err != nil {
			return fail(StateError, err)
		}
	}
	for _, o := range objs {
		if _, err := m.applier.apply(ctx, o, m.cfg.DefaultNamespace); err != nil {
			var wait errWaitKind
			if errors.As(err, &wait) {
				return fail(StateProcessing, err)
			}
			return fail(StateError, err)
		}
	}
	var applied *unstructured.Unstructured
	if cr != nil {
		if applied, err = m.applier.apply(ctx, cr, m.cfg.DefaultNamespace); err != nil {
			var wait errWaitKind
			if errors.As(err, &wait) {
				return fail(StateProcessing, err)
			}
			return fail(StateError, fmt.Errorf("default CR: %w", err))
		}
		st["resource"] = map[string]any{
			"apiVersion": applied.GetAPIVersion(), "kind": applied.GetKind(),
			"metadata": map[string]any{"name": applied.GetName(), "namespace": applied.GetNamespace(), "generation": applied.GetGeneration()},
		}
	}
	// Prune what the previous version installed and this one does not.
	if prev != nil {
		keep := map[ObjectRef]bool{}
		for _, r := range inv.Objects {
			keep[r] = true
		}
		var left []ObjectRef
		for _, r := range deleteOrder(prev.Objects) {
			if keep[r] {
				continue
			}
			if done, err := m.applier.remove(ctx, r); err != nil || !done {
				left = append(left, r)
			}
		}
		if prev.CR != nil && (inv.CR == nil || *prev.CR != *inv.CR) {
			if done, err := m.applier.remove(ctx, *prev.CR); err != nil || !done {
				inv.CR = prev.CR
			}
		}
		if len(left) > 0 {
			inv.Objects = unionRefs(inv.Objects, left)
		}
	}
	if !reflect.DeepEqual(pending, *inv) {
		if err := m.writeInventory(ctx, ns, kymaName, inv); err != nil {
			return fail(StateError, err)
		}
	}
	if applied == nil {
		st["state"] = StateReady
		return st
	}
	state, msg := crState(applied, r.Template)
	st["state"] = state
	if msg != "" {
		st["message"] = msg
	}
	return st
}

func setLabels(o *unstructured.Unstructured, kyma, mod string) {
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManagedBy] = ManagedBy
	l[LabelModule] = mod
	l[LabelKyma] = kyma
	o.SetLabels(l)
}

// manifestObjects are the objects of the module's raw manifest.
func manifestObjects(a *module.Artifact) ([]*unstructured.Unstructured, error) {
	r := a.Descriptor.Resource(module.ResourceRawManifest)
	if r == nil {
		return nil, fmt.Errorf("module %s has no %s resource", a.Descriptor.Component.Name, module.ResourceRawManifest)
	}
	b, ok := a.Blobs[digestOf(r.Access.LocalReference)]
	if !ok {
		return nil, fmt.Errorf("module %s: layer %s of %s missing", a.Descriptor.Component.Name, r.Access.LocalReference, module.ResourceRawManifest)
	}
	objs, err := module.ReadObjects(b.Data)
	if err != nil {
		return nil, fmt.Errorf("module %s: %s: %w", a.Descriptor.Component.Name, module.ResourceRawManifest, err)
	}
	applyOrder(objs)
	return objs, nil
}

// crState is the module's state from its custom resource: the template's customStateCheck
// mappings when it has them (the first whose JSON path has its value wins; none: Processing),
// else the CR's status.state (none yet: Processing, waiting for the module's operator).
func crState(cr *unstructured.Unstructured, template *unstructured.Unstructured) (string, string) {
	checks, _, _ := unstructured.NestedSlice(template.Object, "spec", "customStateCheck")
	if len(checks) > 0 {
		for _, it := range checks {
			c, _ := it.(map[string]any)
			path, _ := c["jsonPath"].(string)
			want, _ := c["value"].(string)
			mapped, _ := c["mappedState"].(string)
			if got, ok := lookupPath(cr.Object, path); ok && got == want {
				return mapped, ""
			}
		}
		return StateProcessing, "no customStateCheck of the template matches the module's custom resource yet"
	}
	state, _, _ := unstructured.NestedString(cr.Object, "status", "state")
	switch state {
	case StateReady, StateProcessing, StateError, StateDeleting, StateWarning:
		return state, ""
	case "":
		return StateProcessing, fmt.Sprintf("waiting for %s %s to report status.state", cr.GetKind(), cr.GetName())
	}
	return StateError, fmt.Sprintf("%s %s reports the unknown state %q", cr.GetKind(), cr.GetName(), state)
}

// lookupPath reads a JSON path (lifecycle-manager's customStateCheck form: "status.health" or
// "{.status.health}") as a string.
func lookupPath(obj map[string]any, path string) (string, bool) {
	p := strings.TrimSpace(path)
	if !strings.HasPrefix(p, "{") {
		p = "{." + strings.TrimPrefix(p, ".") + "}"
	}
	jp := jsonpath.New("customStateCheck").AllowMissingKeys(false)
	if err := jp.Parse(p); err != nil {
		return "", false
	}
	res, err := jp.FindResults(obj)
	if err != nil || len(res) == 0 || len(res[0]) == 0 {
		return "", false
	}
	return fmt.Sprint(res[0][0].Interface()), true
}

// removeModule deletes what the manager installed for a module: the default CR first (its
// operator may need to clean up; the module's other objects wait until it is gone), then the
// manifest's objects, then the inventory. It reports whether the module is gone.
func (m *Manager) removeModule(ctx context.Context, ns, kyma, name string) (bool, error) {
	inv, err := m.readInventory(ctx, ns, kyma, name)
	if err != nil || inv == nil {
		return inv == nil && err == nil, err
	}
	if inv.CR != nil && inv.Policy != module.PolicyIgnore {
		done, err := m.applier.remove(ctx, *inv.CR)
		if err != nil || !done {
			return false, err
		}
	}
	allGone := true
	for _, r := range deleteOrder(inv.Objects) {
		done, err := m.applier.remove(ctx, r)
		if err != nil {
			return false, err
		}
		allGone = allGone && done
	}
	if !allGone {
		return false, nil
	}
	return true, m.deleteInventory(ctx, ns, kyma, name)
}

// specModules are the Kyma resource's spec.modules entries, the first of each name, and the
// names with an entry that says managed: false.
func specModules(kyma *unstructured.Unstructured) ([]map[string]any, map[string]bool) {
	list, _, _ := unstructured.NestedSlice(kyma.Object, "spec", "modules")
	var entries []map[string]any
	seen, unmanaged := map[string]bool{}, map[string]bool{}
	for _, it := range list {
		entry, _ := it.(map[string]any)
		name, _ := entry["name"].(string)
		if name == "" {
			continue
		}
		if managed, ok := entry["managed"].(bool); ok && !managed {
			unmanaged[name] = true
		}
		if !seen[name] {
			seen[name] = true
			entries = append(entries, entry)
		}
	}
	return entries, unmanaged
}
