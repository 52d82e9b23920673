// Package fromsecret is the provisioner's Director client whose OAuth client comes from a Secret
// of the control-plane cluster (seed 000: APP_CREDENTIALS_NAMESPACE and
// APP_OAUTH_CREDENTIALS_SECRET_NAME). It watches the Secret and rebuilds the client whenever the
// Secret changes, so rotated credentials are used without a restart.
package fromsecret

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/compass"
)

// Keys of the Secret: those of the Compass provisioner's compass-provisioner-credentials.
const (
	KeyClientID     = "client_id"
	KeyClientSecret = "client_secret"
	KeyTokenURL     = "tokens_endpoint"
)

// Client is a pdirector.Client over the current credentials of the Secret.
type Client struct {
	namespace, name string
	base            director.Config
	current         atomic.Pointer[state]
	log             logrus.FieldLogger
}

// state is the client built from one version of the Secret, or why none could be built.
type state struct {
	client  *director.Client
	version string
	err     error
}

var (
	_ compass.Client          = (*Client)(nil)
	_ compass.ConditionReader = (*Client)(nil)
)

// Start reads namespace/name once (an error if it is missing or incomplete: the provisioner
// cannot register runtimes without it) and then watches it until ctx ends. base is the rest of
// the Director configuration (URL, timeouts); its OAuth fields are replaced by the Secret's.
func Start(ctx context.Context, kube kubernetes.Interface, namespace, name string, base director.Config, log logrus.FieldLogger) (*Client, error) {
	c := &Client{namespace: namespace, name: name, base: base, log: log.WithFields(logrus.Fields{"secret_namespace": namespace, "secret": name})}
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := kube.CoreV1().Secrets(namespace).Get(readCtx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the Director's OAuth credentials from Secret %s/%s (APP_CREDENTIALS_NAMESPACE, APP_OAUTH_CREDENTIALS_SECRET_NAME): %w", namespace, name, err)
	}
	if err := c.apply(s); err != nil {
		return nil, err
	}
	go c.watch(ctx, kube, s.ResourceVersion)
	return c, nil
}

// watch follows the Secret from version rv until ctx ends; when a watch ends (the API server
// closes watches now and then, or rv is too old) it reads the Secret again and resumes.
func (c *Client) watch(ctx context.Context, kube kubernetes.Interface, rv string) {
	secrets := kube.CoreV1().Secrets(c.namespace)
	selector := fields.OneTermEqualSelector("metadata.name", c.name).String()
	for ctx.Err() == nil {
		w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: rv})
		if err == nil {
			for ev := range w.ResultChan() {
				s, ok := ev.Object.(*corev1.Secret)
				switch {
				case ev.Type == watch.Deleted:
					c.current.Store(&state{err: fmt.Errorf("the Director's credentials Secret %s/%s was deleted", c.namespace, c.name)})
					c.log.Error("the Director's credentials Secret was deleted; Director calls fail until it is back")
				case ok && (ev.Type == watch.Added || ev.Type == watch.Modified):
					rv = s.ResourceVersion
					if err := c.apply(s); err != nil {
						c.log.WithError(err).Error("the Director's credentials Secret changed and cannot be used; Director calls fail until it is fixed")
					}
				}
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second): // no busy loop while the API server is away
		}
		s, err := secrets.Get(ctx, c.name, metav1.GetOptions{})
		switch {
		case err == nil:
			rv = s.ResourceVersion
			if err := c.apply(s); err != nil {
				c.log.WithError(err).Error("the Director's credentials Secret cannot be used; Director calls fail until it is fixed")
			}
		case ctx.Err() == nil:
			c.log.WithError(err).Warn("reading the Director's credentials Secret again; keeping the last credentials")
		}
	}
}

// apply builds a client from the Secret (unless this version is the current one).
func (c *Client) apply(s *corev1.Secret) error {
	if cur := c.current.Load(); cur != nil && cur.version == s.ResourceVersion && cur.err == nil {
		return nil
	}
	cfg := c.base
	cfg.OAuthClientID, cfg.OAuthClientSecret, cfg.OAuthTokenURL = string(s.Data[KeyClientID]), string(s.Data[KeyClientSecret]), string(s.Data[KeyTokenURL])
	var missing []error
	for key, v := range map[string]string{KeyClientID: cfg.OAuthClientID, KeyClientSecret: cfg.OAuthClientSecret, KeyTokenURL: cfg.OAuthTokenURL} {
		if v == "" {
			missing = append(missing, fmt.Errorf("key %s is missing", key))
		}
	}
	if err := errors.Join(missing...); err != nil {
		err = fmt.Errorf("Secret %s/%s: %w", c.namespace, c.name, err)
		c.current.Store(&state{version: s.ResourceVersion, err: err})
		return err
	}
	dc, err := director.New(cfg)
	if err != nil {
		err = fmt.Errorf("Secret %s/%s: %w", c.namespace, c.name, err)
		c.current.Store(&state{version: s.ResourceVersion, err: err})
		return err
	}
	c.current.Store(&state{client: dc, version: s.ResourceVersion})
	c.log.WithField("resource_version", s.ResourceVersion).Info("using the Director's OAuth client from the Secret")
	return nil
}

func (c *Client) client() (*director.Client, error) {
	s := c.current.Load()
	if s.err != nil {
		return nil, s.err
	}
	return s.client, nil
}

func (c *Client) RegisterRuntime(ctx context.Context, tenant, runtimeID, name, condition string, labels map[string]any) (string, error) {
	dc, err := c.client()
	if err != nil {
		return "", err
	}
	return dc.RegisterRuntime(ctx, tenant, runtimeID, name, condition, labels)
}

func (c *Client) UpdateRuntimeLabels(ctx context.Context, tenant, compassID string, labels map[string]string) error {
	dc, err := c.client()
	if err != nil {
		return err
	}
	return dc.UpdateRuntimeLabels(ctx, tenant, compassID, labels)
}

func (c *Client) RequestOneTimeToken(ctx context.Context, tenant, compassID string) (compass.Token, error) {
	dc, err := c.client()
	if err != nil {
		return compass.Token{}, err
	}
	return dc.RequestOneTimeToken(ctx, tenant, compassID)
}

func (c *Client) UnregisterRuntime(ctx context.Context, tenant, compassID string) error {
	dc, err := c.client()
	if err != nil {
		return err
	}
	return dc.UnregisterRuntime(ctx, tenant, compassID)
}

func (c *Client) SetRuntimeStatusCondition(ctx context.Context, tenant, compassID, condition string) error {
	dc, err := c.client()
	if err != nil {
		return err
	}
	return dc.SetRuntimeStatusCondition(ctx, tenant, compassID, condition)
}

// RuntimeStatusCondition reads the runtime's status condition with the current credentials.
func (c *Client) RuntimeStatusCondition(ctx context.Context, tenant, compassID string) (string, error) {
	dc, err := c.client()
	if err != nil {
		return "", err
	}
	return dc.RuntimeStatusCondition(ctx, tenant, compassID)
}
