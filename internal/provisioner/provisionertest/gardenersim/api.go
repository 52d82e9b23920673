package gardenersim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure/gardener/shootcontract"
)

// The simulator's Gardener API is a loopback HTTP server in front of the kube-apiserver (which
// stores the Shoots as a CRD). A CRD can have no subresource but status and scale, so the
// server answers POST .../shoots/{name}/adminkubeconfig itself, at the path Gardener serves it;
// it rejects Shoot writes that break shootcontract's rules (as Gardener's validation and the
// provider extensions' admission would) with Gardener's 422 Invalid; everything else it
// forwards to the kube-apiserver with the test's admin credentials.

var (
	shootPath = regexp.MustCompile(`^/apis/core\.gardener\.cloud/v1beta1/namespaces/([^/]+)/shoots(?:/([^/]+))?(?:/([^/]+))?$`)
	shootGK   = schema.GroupKind{Group: "core.gardener.cloud", Kind: "Shoot"}
	akrGK     = schema.GroupKind{Group: "authentication.gardener.cloud", Kind: "AdminKubeconfigRequest"}
)

// AdminKubeconfigRequest is one request the simulator answered.
type AdminKubeconfigRequest struct {
	Namespace, Shoot string
	// Requested is spec.expirationSeconds as sent (0 when left out); Issued what was issued.
	Requested, Issued int64
	ExpiresAt         time.Time
}

type api struct {
	facts   shootcontract.Facts
	rest    *rest.Config
	proxy   *httputil.ReverseProxy
	rt      http.RoundTripper
	g       *fakeGardener
	maxExp  time.Duration
	mu      sync.Mutex
	issued  []AdminKubeconfigRequest
	rejects []string
}

func newAPI(g *fakeGardener, cfg *rest.Config, maxExp time.Duration) (*api, error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("transport to the kube-apiserver: %w", err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.Transport = rt
	p.FlushInterval = -1 // watches stream
	return &api{facts: shootcontract.MustLoad(), rest: cfg, proxy: p, rt: rt, g: g, maxExp: maxExp}, nil
}

// serve listens on loopback until ctx ends and returns a kubeconfig of the server.
func (a *api) serve(ctx context.Context) ([]byte, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	stop := func() {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(c)
		<-done
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["gardener"] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String()}
	kc.AuthInfos["gardener"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["gardener"] = &clientcmdapi.Context{Cluster: "gardener", AuthInfo: "gardener"}
	kc.CurrentContext = "gardener"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return b, stop, nil
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := shootPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		a.proxy.ServeHTTP(w, r)
		return
	}
	ns, name, sub := m[1], m[2], m[3]
	switch {
	case sub == "adminkubeconfig" && r.Method == http.MethodPost:
		a.adminKubeconfig(w, r, ns, name)
		return
	case sub == "adminkubeconfig":
		writeStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: shootGK.Group, Resource: "shoots/adminkubeconfig"}, r.Method))
		return
	case sub == "" && (r.Method == http.MethodPost && name == "" || r.Method == http.MethodPut && name != ""):
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			writeStatus(w, apierrors.NewBadRequest("the simulator takes Shoots as JSON: "+err.Error()))
			return
		}
		if a.reject(w, obj) {
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	case sub == "" && r.Method == http.MethodPatch && name != "":
		// The result of a patch is known only after it is applied: ask the kube-apiserver for
		// it without storing it (dryRun), check it, then apply.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if obj, ok := a.dryRun(r, body); ok && a.reject(w, obj) {
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	a.proxy.ServeHTTP(w, r)
}

// reject answers 422 Invalid when obj breaks the contract.
func (a *api) reject(w http.ResponseWriter, obj map[string]any) bool {
	vs := a.facts.Check(obj)
	if len(vs) == 0 {
		return false
	}
	name, _ := lookupString(obj, "metadata", "name")
	errs := field.ErrorList{}
	for _, v := range vs {
		errs = append(errs, &field.Error{Type: errorType(v.Type), Field: v.Field, BadValue: "", Detail: v.Message})
	}
	a.mu.Lock()
	for _, v := range vs {
		a.rejects = append(a.rejects, v.Rule)
	}
	a.mu.Unlock()
	writeStatus(w, apierrors.NewInvalid(shootGK, name, errs))
	return true
}

func (a *api) dryRun(r *http.Request, body []byte) (map[string]any, bool) {
	u := *r.URL
	q := u.Query()
	q.Set("dryRun", "All")
	u.RawQuery = q.Encode()
	target, _ := url.Parse(a.rest.Host)
	u.Scheme, u.Host = target.Scheme, target.Host
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPatch, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	req.Header.Set("Accept", "application/json")
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, false // the real request fails the same way
	}
	var obj map[string]any
	if json.NewDecoder(resp.Body).Decode(&obj) != nil {
		return nil, false
	}
	return obj, true
}

// adminKubeconfig plays Gardener's shoots/adminkubeconfig: the expiration is checked and
// capped as Gardener does, the Shoot must advertise its API server, and the kubeconfig is a
// ServiceAccount token (cluster-admin) of this API server, which plays every runtime.
func (a *api) adminKubeconfig(w http.ResponseWriter, r *http.Request, ns, name string) {
	facts := a.facts.AdminKubeconfigRequest
	var req struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			ExpirationSeconds *int64 `json:"expirationSeconds"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeStatus(w, apierrors.NewBadRequest("decoding the AdminKubeconfigRequest: "+err.Error()))
		return
	}
	if (req.APIVersion != "" && req.APIVersion != facts.APIVersion) || (req.Kind != "" && req.Kind != facts.Kind) {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("want %s %s, not %s %s", facts.APIVersion, facts.Kind, req.APIVersion, req.Kind)))
		return
	}
	exp := facts.Spec.ExpirationSeconds.Default
	var requested int64
	if req.Spec.ExpirationSeconds != nil {
		requested = *req.Spec.ExpirationSeconds
		exp = requested
	}
	path := field.NewPath("spec", "expirationSeconds")
	switch {
	case exp < facts.Spec.ExpirationSeconds.Min:
		writeStatus(w, apierrors.NewInvalid(akrGK, "", field.ErrorList{field.Invalid(path, exp, facts.Spec.ExpirationSeconds.MinMessage)}))
		return
	case exp > facts.Spec.ExpirationSeconds.Max:
		writeStatus(w, apierrors.NewInvalid(akrGK, "", field.ErrorList{field.TooLong(path, exp, int(facts.Spec.ExpirationSeconds.Max))}))
		return
	}
	if maxSeconds := int64(a.maxExp.Seconds()); exp > maxSeconds {
		exp = maxSeconds
	}
	ctx := r.Context()
	shoot, err := a.g.dyn.Resource(shootGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		writeError(w, err)
		return
	}
	addrs, _, _ := nestedSlice(shoot.Object, "status", "advertisedAddresses")
	suitable := false
	for _, e := range addrs {
		m, _ := e.(map[string]any)
		for _, n := range facts.RequiresAdvertisedAddress.Names {
			if m["name"] == n {
				suitable = true
			}
		}
	}
	if !suitable {
		writeStatus(w, apierrors.NewInvalid(akrGK, name, field.ErrorList{field.Invalid(field.NewPath("status", "status"), addrs, facts.RequiresAdvertisedAddress.Message)}))
		return
	}
	kc, expiresAt, err := a.issue(ctx, ns, exp)
	if err != nil {
		writeError(w, fmt.Errorf("issuing the admin kubeconfig: %w", err))
		return
	}
	a.mu.Lock()
	a.issued = append(a.issued, AdminKubeconfigRequest{Namespace: ns, Shoot: name, Requested: requested, Issued: exp, ExpiresAt: expiresAt})
	a.mu.Unlock()
	out := map[string]any{
		"apiVersion": facts.APIVersion, "kind": facts.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "creationTimestamp": nil},
		"spec":     map[string]any{"expirationSeconds": exp},
		"status":   map[string]any{"kubeconfig": kc, "expirationTimestamp": expiresAt.UTC().Format(time.RFC3339)},
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(out) // kc is []byte: base64, as Gardener's []byte field
}

// adminAccount is the ServiceAccount, in the project namespace, whose tokens are the admin
// kubeconfigs (bound to cluster-admin).
const adminAccount = "gardenersim-admin"

func (a *api) issue(ctx context.Context, ns string, seconds int64) ([]byte, time.Time, error) {
	core := a.g.core
	_, err := core.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: adminAccount}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, time.Time{}, err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gardenersim-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: adminAccount, Namespace: ns}},
	}
	if _, err := core.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, time.Time{}, err
	}
	tr, err := core.CoreV1().ServiceAccounts(ns).CreateToken(ctx, adminAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, time.Time{}, err
	}
	ca := a.rest.CAData
	if len(ca) == 0 && a.rest.CAFile != "" {
		if ca, err = os.ReadFile(a.rest.CAFile); err != nil {
			return nil, time.Time{}, err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["shoot"] = &clientcmdapi.Cluster{Server: a.rest.Host, CertificateAuthorityData: ca, InsecureSkipTLSVerify: a.rest.Insecure}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["shoot"] = &clientcmdapi.Context{Cluster: "shoot", AuthInfo: "admin"}
	kc.CurrentContext = "shoot"
	b, err := clientcmd.Write(*kc)
	return b, tr.Status.ExpirationTimestamp.Time, err
}

func (a *api) cleanup(ns string) {
	_ = a.g.core.RbacV1().ClusterRoleBindings().Delete(context.Background(), "gardenersim-"+ns, metav1.DeleteOptions{})
}

func errorType(t string) field.ErrorType {
	switch t {
	case "Required":
		return field.ErrorTypeRequired
	case "Forbidden":
		return field.ErrorTypeForbidden
	case "NotSupported":
		return field.ErrorTypeNotSupported
	case "Duplicate":
		return field.ErrorTypeDuplicate
	}
	return field.ErrorTypeInvalid
}

func writeError(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		writeStatus(w, se)
		return
	}
	writeStatus(w, apierrors.NewInternalError(err))
}

func writeStatus(w http.ResponseWriter, s apierrors.APIStatus) {
	st := s.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

func lookupString(obj map[string]any, path ...string) (string, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok && strings.TrimSpace(s) != ""
}

func nestedSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}
