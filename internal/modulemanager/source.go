package modulemanager

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrUnsigned and ErrSignature say why an artifact is refused (for errors.Is).
var (
	ErrUnsigned  = errors.New("the module is not signed")
	ErrSignature = errors.New("no signature verifies with a configured key")
	ErrNoKeys    = errors.New("no public keys configured to verify modules with")
)

// source pulls and verifies module artifacts; verified artifacts are kept in memory by
// registry, component and version (a version's content is immutable once verified).
type source struct {
	cfg  *Config
	kube kubernetes.Interface
	mu   sync.Mutex
	seen map[string]*module.Artifact
}

func newSource(cfg *Config, kube kubernetes.Interface) *source {
	return &source{cfg: cfg, kube: kube, seen: map[string]*module.Artifact{}}
}

// artifact pulls the component version the descriptor names from the registry of its last
// repository context (the effective one after transfers) and verifies it.
func (s *source) artifact(ctx context.Context, cd *module.ComponentDescriptor) (*module.Artifact, error) {
	comp := cd.Component
	rc := cd.EffectiveRepositoryContext()
	if rc == nil {
		return nil, fmt.Errorf("the descriptor of %s:%s names no registry", comp.Name, comp.Version)
	}
	base, plain := splitScheme(rc.BaseURL)
	host, _, _ := strings.Cut(base, "/")
	key := base + "|" + comp.Name + "|" + comp.Version
	s.mu.Lock()
	a, ok := s.seen[key]
	s.mu.Unlock()
	if ok {
		return a, nil
	}
	user, pass, err := s.credentials(ctx, host)
	if err != nil {
		return nil, err
	}
	reg, err := module.NewRegistry(module.RegistryOptions{
		Registry: base, Insecure: plain || s.cfg.plainHTTP(host), CAFile: s.cfg.CAFile,
		NameMapping: rc.ComponentNameMapping, Username: user, Password: pass,
	}, s.cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", rc.BaseURL, err)
	}
	a, err = reg.Get(ctx, comp.Name, comp.Version)
	if err != nil {
		return nil, fmt.Errorf("pull %s:%s from %s: %w", comp.Name, comp.Version, rc.BaseURL, err)
	}
	if err := s.verify(a); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.seen[key] = a
	s.mu.Unlock()
	return a, nil
}

// verify accepts the artifact if one of its signatures verifies (descriptor digest, signature
// and every layer's content) with one of the configured keys.
func (s *source) verify(a *module.Artifact) error {
	comp := a.Descriptor.Component.Name + ":" + a.Descriptor.Component.Version
	if len(s.cfg.PublicKeys) == 0 {
		return fmt.Errorf("verify %s: %w", comp, ErrNoKeys)
	}
	if len(a.Descriptor.Signatures) == 0 {
		return fmt.Errorf("verify %s: %w", comp, ErrUnsigned)
	}
	var reasons []string
	for _, sig := range a.Descriptor.Signatures {
		for _, k := range s.cfg.PublicKeys {
			err := a.Verify(sig.Name, k)
			if err == nil {
				return nil
			}
			if errors.Is(err, module.ErrContentTampering) || errors.Is(err, module.ErrDigestMismatch) {
				// The content itself is wrong: no other key changes that.
				return fmt.Errorf("%w: %w", ErrSignature, err)
			}
			reasons = append(reasons, err.Error())
		}
	}
	return fmt.Errorf("%w: %s", ErrSignature, strings.Join(reasons, "; "))
}

// splitScheme strips http:// (plain HTTP) or https:// from a repository context's base URL.
func splitScheme(base string) (string, bool) {
	if rest, ok := strings.CutPrefix(base, "http://"); ok {
		return rest, true
	}
	return strings.TrimPrefix(base, "https://"), false
}

// credentials reads the registry credentials for host from the configured Secret: a docker
// config (.dockerconfigjson) or username and password keys; without a Secret, from the docker
// config given in the configuration (Config.DockerConfig). Neither: none.
func (s *source) credentials(ctx context.Context, host string) (string, string, error) {
	if s.cfg.RegistrySecret == "" {
		if len(s.cfg.DockerConfig) == 0 {
			return "", "", nil
		}
		return DockerConfigCredentials(s.cfg.DockerConfig, host)
	}
	ns, name, ok := strings.Cut(s.cfg.RegistrySecret, "/")
	if !ok {
		return "", "", fmt.Errorf("registry secret %q: want NAMESPACE/NAME", s.cfg.RegistrySecret)
	}
	sec, err := s.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("read registry secret %s: %w", s.cfg.RegistrySecret, err)
	}
	if raw, ok := sec.Data[".dockerconfigjson"]; ok {
		u, p, err := DockerConfigCredentials(raw, host)
		if err != nil {
			return "", "", fmt.Errorf("registry secret %s: %w", s.cfg.RegistrySecret, err)
		}
		return u, p, nil
	}
	return string(sec.Data["username"]), string(sec.Data["password"]), nil
}

// DockerConfigCredentials are the credentials a docker config (config.json, or a
// kubernetes.io/dockerconfigjson Secret's .dockerconfigjson) has for host ("" when none).
// Errors never quote the config.
func DockerConfigCredentials(raw []byte, host string) (string, string, error) {
	var cfg struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", "", errors.New("docker config: not a JSON object with auths")
	}
	for h, a := range cfg.Auths {
		h, _ = splitScheme(h)
		if strings.TrimSuffix(h, "/") != host {
			continue
		}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return "", "", fmt.Errorf("docker config: auth of %s is not base64", h)
			}
			u, p, _ := strings.Cut(string(dec), ":")
			return u, p, nil
		}
		return a.Username, a.Password, nil
	}
	return "", "", nil
}

// keyFingerprints names the configured keys (for logs).
func keyFingerprints(keys []*rsa.PublicKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, module.KeyFingerprint(k))
	}
	return out
}
