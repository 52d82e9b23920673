// Package scoped issues credentials confined to one namespace of a host cluster: a
// ServiceAccount of the runtime, bound by a Role to that namespace only, and kubeconfigs with
// short-lived tokens of it (TokenRequest). Deleting the ServiceAccount revokes every token it
// was issued: the API server checks that a bound token's ServiceAccount still exists.
package scoped

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// MinExpiration is the shortest token the API server issues (TokenRequest refuses less).
const MinExpiration = 10 * time.Minute

// RoleName is the Role (and RoleBinding) granting an account its namespace.
const RoleName = "keb-runtime-admin"

// Issuer issues namespace-scoped credentials on one host cluster.
type Issuer struct {
	cfg  *rest.Config
	kube kubernetes.Interface
}

// New connects to the host cluster with cfg (an identity allowed to manage namespaces,
// ServiceAccounts and RBAC).
func New(cfg *rest.Config) (*Issuer, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the host cluster client: %w", err)
	}
	return &Issuer{cfg: cfg, kube: kube}, nil
}

// Credentials are a kubeconfig and when its token expires.
type Credentials struct {
	Kubeconfig string
	ExpiresAt  time.Time
}

// Grant makes sure namespace exists and that account is a ServiceAccount there with full
// rights on the namespace's resources and none elsewhere. Idempotent.
func (i *Issuer) Grant(ctx context.Context, namespace, account string, labels map[string]string) error {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}
	if _, err := i.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	if _, err := i.kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(account)}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, account, err)
	}
	// A Role only ever reaches its own namespace, whatever its rules say.
	role := &rbacv1.Role{ObjectMeta: meta(RoleName), Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	if _, err := i.kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Role %s/%s: %w", namespace, RoleName, err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: meta(account + "-" + RoleName),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: namespace}},
	}
	if _, err := i.kube.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating RoleBinding %s/%s: %w", namespace, rb.Name, err)
	}
	return nil
}

// BindUsers gives each user the namespace's Role (everything in the namespace, nothing
// outside). Idempotent.
func (i *Issuer) BindUsers(ctx context.Context, namespace string, users []string, labels map[string]string) error {
	for _, u := range users {
		sum := sha256.Sum256([]byte(u))
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "admin-" + hex.EncodeToString(sum[:8]), Namespace: namespace, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u}},
		}
		if _, err := i.kube.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("binding %s to namespace %s: %w", u, namespace, err)
		}
	}
	return nil
}

// Kubeconfig issues a token of namespace/account valid for expiration (at least
// MinExpiration) and returns a kubeconfig using it, with the namespace as its default.
func (i *Issuer) Kubeconfig(ctx context.Context, namespace, account string, expiration time.Duration) (Credentials, error) {
	if expiration < MinExpiration {
		expiration = MinExpiration
	}
	secs := int64(expiration / time.Second)
	tr, err := i.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, account,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return Credentials{}, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, account, err)
	}
	if err := i.awaitEffective(ctx, namespace, account, tr.Status.Token); err != nil {
		return Credentials{}, err
	}
	kc, err := i.kubeconfig(namespace, account, tr.Status.Token)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{Kubeconfig: kc, ExpiresAt: tr.Status.ExpirationTimestamp.Time}, nil
}

// EffectiveWithin bounds how long issuing waits for the API server to honour a new grant.
const EffectiveWithin = 10 * time.Second

// awaitEffective returns once the token is authenticated and allowed everything in its
// namespace. The API server's authenticator and RBAC authorizer read from caches that learn
// of a new ServiceAccount and RoleBinding a moment after they are written; credentials
// handed out before that would be refused on first use. The token asks about itself
// (SelfSubjectAccessReview, which every authenticated identity may create), so this needs
// no right beyond those Grant needs. Past EffectiveWithin the error is the caller's to retry.
func (i *Issuer) awaitEffective(ctx context.Context, namespace, account, token string) error {
	cfg := rest.AnonymousClientConfig(i.cfg)
	cfg.BearerToken = token
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a client with the token of %s/%s: %w", namespace, account, err)
	}
	review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: namespaceWide(namespace),
	}}
	return waitFor(ctx, fmt.Sprintf("the API server to honour the token of ServiceAccount %s/%s", namespace, account), func(ctx context.Context) (bool, error) {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		switch {
		case err == nil && r.Status.Allowed:
			return true, nil
		case err == nil:
			return false, fmt.Errorf("not yet allowed its namespace (%s)", r.Status.Reason)
		case apierrors.IsUnauthorized(err):
			return false, fmt.Errorf("not yet authenticated: %w", err)
		}
		return false, err
	})
}

// awaitRevoked returns once the API server's authorizer no longer allows the account its
// namespace: it learns of a deleted RoleBinding through the same caches, and a binding's
// credentials must be refused once unbind answered. It asks with a SubjectAccessReview; a
// host identity without the right to create one (not among Grant's) is not waited for.
func (i *Issuer) awaitRevoked(ctx context.Context, namespace, account string) error {
	review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		// The account alone, without its groups: what the cluster grants every service account
		// or authenticated user is not the account's grant, and would never go away.
		User:               "system:serviceaccount:" + namespace + ":" + account,
		ResourceAttributes: namespaceWide(namespace),
	}}
	return waitFor(ctx, fmt.Sprintf("the API server to refuse ServiceAccount %s/%s", namespace, account), func(ctx context.Context) (bool, error) {
		r, err := i.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		switch {
		case apierrors.IsForbidden(err):
			return true, nil
		case err == nil && !r.Status.Allowed:
			return true, nil
		case err == nil:
			return false, errors.New("still allowed its namespace")
		}
		return false, err
	})
}

// namespaceWide is everything in namespace: what Grant's Role allows.
func namespaceWide(namespace string) *authzv1.ResourceAttributes {
	return &authzv1.ResourceAttributes{Namespace: namespace, Verb: "*", Group: "*", Resource: "*"}
}

// waitFor asks done until it answers true, at most EffectiveWithin; past that the error names
// what was awaited and the API server's last answer, for the caller to retry.
func waitFor(ctx context.Context, what string, done func(context.Context) (bool, error)) error {
	last, asked := errors.New("not yet asked"), false
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, EffectiveWithin, true, func(ctx context.Context) (bool, error) {
		ok, err := done(ctx)
		// A call cut short by the deadline says nothing about the API server: keep its last
		// real answer for the error.
		if err != nil && (!cutShort(ctx, err) || !asked) {
			last, asked = err, true
		}
		return ok, nil // the API server's answers are retried until the time is up
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, last)
	}
	return nil
}

// cutShort tells whether err ended a call because ctx ended or was about to: client-go's rate
// limiter refuses to wait past the deadline with an error of x/time/rate that wraps nothing.
func cutShort(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "would exceed context deadline")
}

func (i *Issuer) kubeconfig(namespace, account, token string) (string, error) {
	ca := i.cfg.CAData
	if len(ca) == 0 && i.cfg.CAFile != "" {
		// The file is only readable here; the kubeconfig travels, so it carries the data.
		b, err := os.ReadFile(i.cfg.CAFile)
		if err != nil {
			return "", fmt.Errorf("reading the host cluster's CA: %w", err)
		}
		ca = b
	}
	name := namespace + "-" + account
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server: i.cfg.Host, CertificateAuthorityData: ca, InsecureSkipTLSVerify: i.cfg.Insecure && len(ca) == 0,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name, Namespace: namespace}},
		CurrentContext: name,
	}
	b, err := clientcmd.Write(cfg)
	if err != nil {
		return "", fmt.Errorf("writing the kubeconfig of %s/%s: %w", namespace, account, err)
	}
	return string(b), nil
}

// Revoke deletes the account's RoleBinding and the ServiceAccount, which invalidates every
// token issued for it, and returns once the API server refuses the account its namespace.
// Missing objects are fine.
func (i *Issuer) Revoke(ctx context.Context, namespace, account string) error {
	err := i.kube.RbacV1().RoleBindings(namespace).Delete(ctx, account+"-"+RoleName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting RoleBinding %s/%s-%s: %w", namespace, account, RoleName, err)
	}
	err = i.kube.CoreV1().ServiceAccounts(namespace).Delete(ctx, account, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ServiceAccount %s/%s: %w", namespace, account, err)
	}
	return i.awaitRevoked(ctx, namespace, account)
}

// Remove revokes the accounts and deletes the namespace (with everything in it).
func (i *Issuer) Remove(ctx context.Context, namespace string, accounts ...string) error {
	var errs []error
	for _, a := range accounts {
		errs = append(errs, i.Revoke(ctx, namespace, a))
	}
	err := i.kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting namespace %s: %w", namespace, err))
	}
	return errors.Join(errs...)
}

// Exists reports whether the account still exists.
func (i *Issuer) Exists(ctx context.Context, namespace, account string) (bool, error) {
	_, err := i.kube.CoreV1().ServiceAccounts(namespace).Get(ctx, account, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading ServiceAccount %s/%s: %w", namespace, account, err)
	}
	return true, nil
}
