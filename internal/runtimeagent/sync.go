package runtimeagent

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels the agent sets on its runtime in the Director.
const (
	LabelEventServiceURL = "runtime_eventServiceUrl"
	LabelConsoleURL      = "runtime_consoleUrl"
)

// synchronize fetches the runtime's applications from the Director, makes the Application
// resources match them and labels the runtime; the status says how far it got.
// The runtime is the certificate's identity (its CN), which the Director authorises the calls by.
func (a *Agent) synchronize(ctx context.Context, conn *CompassConnection, creds ClientCredentials, cert *x509.Certificate, st *CompassConnectionStatus) {
	if st.SynchronizationStatus == nil {
		st.SynchronizationStatus = &SynchronizationStatus{}
	}
	ss := st.SynchronizationStatus
	ss.LastAttempt = a.stamp()
	start := time.Now()
	defer func() {
		a.metrics.syncDuration.Observe(time.Since(start).Seconds())
		if st.State != Synchronized {
			a.metrics.syncFailures.WithLabelValues(string(st.State)).Inc()
		}
	}()
	runtimeID, tenant := cert.Subject.CommonName, conn.Annotations[annotationTenant]
	if runtimeID == "" || tenant == "" {
		st.State, ss.Error = SynchronizationFailed, "the certificate has no CN or the CompassConnection lacks the tenant annotation: delete it to reconnect"
		return
	}
	url := conn.Spec.ManagementInfo.DirectorURL
	cctx, cancel := a.bounded(ctx)
	apps, err := a.director.ApplicationsForRuntime(cctx, url, tenant, runtimeID, creds)
	cancel()
	if err != nil {
		st.State, ss.Error = SynchronizationFailed, err.Error()
		a.log.WithError(err).Warn("fetching applications from the Director failed")
		return
	}
	ss.LastSuccessfulFetch = a.stamp()
	if err := a.applyApplications(ctx, runtimeID, apps); err != nil {
		st.State, ss.Error = ResourceApplicationFailed, err.Error()
		a.log.WithError(err).Warn("applying applications failed")
		return
	}
	ss.LastSuccessfulApplication = a.stamp()
	a.metrics.appsApplied.Set(float64(len(apps)))
	if err := a.labelRuntime(ctx, url, tenant, runtimeID, creds); err != nil {
		st.State, ss.Error = MetadataUpdateFailed, err.Error()
		a.log.WithError(err).Warn("labelling the runtime in the Director failed")
		return
	}
	st.State, ss.Error = Synchronized, ""
	if conn.Spec.ResyncNow {
		if err := a.clearSpecFlags(ctx, conn.Name); err != nil {
			a.log.WithError(err).Warn("clearing spec.resyncNow")
		}
	}
	a.log.WithField("applications", len(apps)).Debug("synchronised with the Director")
}

func (a *Agent) labelRuntime(ctx context.Context, url, tenant, runtimeID string, creds ClientCredentials) error {
	labels := [][2]string{{LabelEventServiceURL, a.cfg.RuntimeEventsURL}, {LabelConsoleURL, a.cfg.RuntimeConsoleURL}}
	for _, l := range labels {
		if l[1] == "" {
			continue // not configured: nothing to report
		}
		cctx, cancel := a.bounded(ctx)
		err := a.director.SetRuntimeLabel(cctx, url, tenant, runtimeID, l[0], l[1], creds)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// applyWorkers is how many writes of a synchronisation are in flight at once.
const applyWorkers = 16

// desired is one Application and the Secrets with its packages' credentials.
type desired struct {
	app     Application
	secrets []*corev1.Secret
}

// applyApplications creates, updates and deletes this runtime's Applications (and their
// credential Secrets) to match apps exactly. One failing application does not stop the
// others; the errors of all are returned together.
func (a *Agent) applyApplications(ctx context.Context, runtimeID string, apps []DirectorApplication) error {
	own := labels.Set{labelManagedBy: managedByAgent, labelRuntimeID: runtimeID}
	var errs []error
	want := map[string]desired{}
	wantSecrets := map[string]bool{}
	for _, app := range apps {
		d, err := a.desiredApplication(runtimeID, app)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := want[d.app.Name]; dup {
			errs = append(errs, fmt.Errorf("application %s (%s): another application has the same name", app.Name, app.ID))
			continue
		}
		want[d.app.Name] = d
		for _, s := range d.secrets {
			wantSecrets[s.Name] = true
		}
	}

	have, listErrs, err := a.ownApplications(ctx, own)
	if err != nil {
		return err
	}
	errs = append(errs, listErrs...)
	haveSecrets, err := a.ownSecrets(ctx, own)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}

	if len(wantSecrets) > 0 {
		if err := ensureNamespace(ctx, a.core, a.cfg.CredentialsNamespace); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// The writes go out in parallel: a first sync of many applications is then bound by the
	// client's rate limit (APP_KUBE_QPS), not by the round trips one after the other.
	work := make(chan func(), applyWorkers)
	var wg sync.WaitGroup
	for i := 0; i < applyWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				f()
			}
		}()
	}
	for _, name := range names {
		d := want[name]
		work <- func() {
			if err := a.applyOne(ctx, d, have, haveSecrets); err != nil {
				fail(err)
			}
		}
	}
	client := a.dyn.Resource(ApplicationGVR)
	for name := range have {
		if _, ok := want[name]; ok {
			continue
		}
		work <- func() {
			a.metrics.writes.WithLabelValues("Application", "delete").Inc()
			if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				fail(fmt.Errorf("deleting Application %s: %w", name, err))
			}
		}
	}
	for name, s := range haveSecrets {
		if wantSecrets[name] {
			continue
		}
		work <- func() {
			a.metrics.writes.WithLabelValues("Secret", "delete").Inc()
			err := a.core.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				fail(fmt.Errorf("deleting credential Secret %s/%s: %w", s.Namespace, s.Name, err))
			}
		}
	}
	close(work)
	wg.Wait()
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

func (a *Agent) applyOne(ctx context.Context, d desired, have map[string]Application, haveSecrets map[string]*corev1.Secret) error {
	for _, s := range d.secrets {
		if cur, ok := haveSecrets[s.Name]; ok && reflect.DeepEqual(cur.Data, s.Data) && reflect.DeepEqual(cur.Labels, s.Labels) {
			continue
		}
		a.metrics.writes.WithLabelValues("Secret", "apply").Inc()
		if err := applySecret(ctx, a.core, s); err != nil {
			return fmt.Errorf("application %s: %w", d.app.Name, err)
		}
	}
	var cur *Application
	if c, ok := have[d.app.Name]; ok {
		cur = &c
	}
	return a.writeApplication(ctx, d.app, cur)
}

// writeApplication makes the Application want unless cur (what the cache says is there, nil
// for nothing) already is it. A cache behind the server (a conflict, an Application already
// there or already gone) is corrected by reading the Application from the server.
func (a *Agent) writeApplication(ctx context.Context, want Application, cur *Application) error {
	client := a.dyn.Resource(ApplicationGVR)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if cur != nil && reflect.DeepEqual(cur.Spec, want.Spec) && reflect.DeepEqual(cur.Labels, want.Labels) {
			return nil
		}
		obj := want
		if cur != nil {
			obj.ResourceVersion = cur.ResourceVersion
		}
		var u *unstructured.Unstructured
		if u, err = toUnstructured(&obj, ApplicationGVR, "Application"); err != nil {
			return err
		}
		if cur != nil {
			a.metrics.writes.WithLabelValues("Application", "update").Inc()
			_, err = client.Update(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		} else {
			a.metrics.writes.WithLabelValues("Application", "create").Inc()
			_, err = client.Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager})
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !(cur != nil && apierrors.IsNotFound(err)) {
			break
		}
		fresh, gerr := client.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			cur = nil
		case gerr != nil:
			return fmt.Errorf("reading Application %s: %w", want.Name, gerr)
		default:
			var app Application
			if err := fromUnstructured(fresh, &app); err != nil {
				return err
			}
			if app.Labels[labelManagedBy] != managedByAgent {
				return fmt.Errorf("writing Application %s: an Application of that name is not the agent's", want.Name)
			}
			cur = &app
		}
	}
	if err != nil {
		return fmt.Errorf("writing Application %s: %w", want.Name, err)
	}
	return nil
}

// desiredApplication is the Application resource for a Director application: named after it
// (it must be a valid resource name), one service per package, the package's credentials for
// this runtime in a Secret of their own.
func (a *Agent) desiredApplication(runtimeID string, app DirectorApplication) (desired, error) {
	if errs := validation.IsDNS1123Subdomain(app.Name); len(errs) > 0 {
		return desired{}, fmt.Errorf("application %s (%s): its name is not a valid resource name: %s", app.Name, app.ID, strings.Join(errs, "; "))
	}
	own := map[string]string{labelManagedBy: managedByAgent, labelRuntimeID: runtimeID}
	clientIDs := make([]string, 0, len(app.Auths))
	for _, a := range app.Auths {
		clientIDs = append(clientIDs, a.ID)
	}
	d := desired{app: Application{
		ObjectMeta: metav1.ObjectMeta{Name: app.Name, Labels: own},
		Spec: ApplicationSpec{
			Description: deref(app.Description), DisplayName: app.Name, ProviderDisplayName: deref(app.ProviderName),
			Labels:          stringLabels(app.Labels),
			CompassMetadata: CompassMetadata{ApplicationID: app.ID, Authentication: Authentication{ClientIDs: clientIDs}},
		},
	}}
	for _, p := range app.Bundles.Data {
		svc := Service{ID: p.ID, Name: p.Name, DisplayName: p.Name, ProviderDisplayName: deref(app.ProviderName),
			Description: deref(p.Description), Entries: []Entry{}}
		if p.DefaultInstanceAuth != nil && len(p.DefaultInstanceAuth.Credential) > 0 && string(p.DefaultInstanceAuth.Credential) != "null" {
			data, kind, err := credentialData(p.DefaultInstanceAuth.Credential)
			if err != nil {
				return desired{}, fmt.Errorf("application %s (%s), package %s: %w", app.Name, app.ID, p.ID, err)
			}
			name := credentialSecretName(app.Name, p.ID)
			secretLabels := map[string]string{labelManagedBy: managedByAgent, labelRuntimeID: runtimeID, labelApplication: app.Name}
			d.secrets = append(d.secrets, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.cfg.CredentialsNamespace, Labels: secretLabels},
				Type:       corev1.SecretTypeOpaque, Data: data,
			})
			svc.Entries = []Entry{{Type: "API", Credentials: &Credentials{Type: kind, SecretName: name}}}
		}
		d.app.Spec.Services = append(d.app.Spec.Services, svc)
	}
	return d, nil
}

// credentialData turns a bundle's CredentialData into Secret data and a type: {"username",
// "password"} (BasicCredentialData) is Basic, {"clientId", "clientSecret", "url"}
// (OAuthCredentialData) is OAuth; an object nested under "basic" or "oauth" is read the same
// way. Strings are kept as they are, anything else as JSON.
func credentialData(raw json.RawMessage) (map[string][]byte, string, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, "", fmt.Errorf("the credentials are not a JSON object: %w", err)
	}
	kind := "Basic"
	if len(obj) == 1 {
		for k, v := range obj {
			if inner, ok := v.(map[string]any); ok {
				obj = inner
				if strings.EqualFold(k, "oauth") {
					kind = "OAuth"
				}
			}
		}
	}
	if _, ok := obj["clientId"]; ok {
		kind = "OAuth"
	}
	data := make(map[string][]byte, len(obj))
	for k, v := range obj {
		if s, ok := v.(string); ok {
			data[k] = []byte(s)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, "", err
		}
		data[k] = b
	}
	return data, kind, nil
}

func credentialSecretName(app, packageID string) string {
	sum := sha256.Sum256([]byte(packageID))
	suffix := "-" + hex.EncodeToString(sum[:6])
	if len(app) > validation.DNS1123SubdomainMaxLength-len(suffix) {
		app = strings.TrimRight(app[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-")
	}
	return app + suffix
}

func stringLabels(in map[string]any) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if s, ok := v.(string); ok {
			out[k] = s
			continue
		}
		b, _ := json.Marshal(v)
		out[k] = string(b)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
