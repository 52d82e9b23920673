package modulemanager

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// Keys of the manager's ConfigMap (what kyma alpha deploy writes and the manager reads).
const (
	ConfigKeyPublicKeys     = "public-keys.pem"
	ConfigKeyPlainHTTP      = "plain-http-registries"
	ConfigKeyRegistrySecret = "registry-secret"
	DefaultConfigName       = "module-manager"
	DefaultSecretName       = "module-manager-registry"
)

// SetupOptions say how kyma alpha deploy sets the manager up on a cluster.
type SetupOptions struct {
	// Namespace of the manager's ConfigMap, Secret and Deployment.
	Namespace string
	// PublicKeys are PEM public keys modules must be signed with.
	PublicKeys [][]byte
	// Registries reached over plain HTTP (hosts).
	PlainHTTPRegistries []string
	// RegistryHost, Username and Password are credentials the manager pulls with.
	RegistryHost, Username, Password string
	// Image, if set, runs the manager in the cluster: a ServiceAccount bound to cluster-admin (it
	// installs arbitrary manifests) and a Deployment of the image.
	Image string
}

// SetupObjects are the objects that set the manager up: its ConfigMap (keys and settings), the
// registry Secret when credentials are given, and with an image its Deployment.
func SetupObjects(o SetupOptions) ([]*unstructured.Unstructured, error) {
	var keys bytes.Buffer
	for i, k := range o.PublicKeys {
		if _, err := ParsePublicKeys(k); err != nil {
			return nil, fmt.Errorf("public key %d: %w", i+1, err)
		}
		keys.Write(bytes.TrimSpace(k))
		keys.WriteString("\n")
	}
	data := map[string]any{
		ConfigKeyPublicKeys: keys.String(),
		ConfigKeyPlainHTTP:  strings.Join(o.PlainHTTPRegistries, "\n"),
	}
	var objs []*unstructured.Unstructured
	if o.Username != "" || o.Password != "" {
		if o.RegistryHost == "" {
			return nil, fmt.Errorf("registry credentials need the registry's host")
		}
		auth := base64.StdEncoding.EncodeToString([]byte(o.Username + ":" + o.Password))
		docker, err := json.Marshal(map[string]any{"auths": map[string]any{o.RegistryHost: map[string]any{"auth": auth}}})
		if err != nil {
			return nil, err
		}
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
			"metadata":   map[string]any{"name": DefaultSecretName, "namespace": o.Namespace},
			"stringData": map[string]any{".dockerconfigjson": string(docker)},
		}})
		data[ConfigKeyRegistrySecret] = o.Namespace + "/" + DefaultSecretName
	}
	objs = append([]*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": DefaultConfigName, "namespace": o.Namespace},
		"data":     data,
	}}}, objs...)
	if o.Image == "" {
		return objs, nil
	}
	labels := map[string]any{"app.kubernetes.io/name": DefaultConfigName}
	objs = append(objs,
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": map[string]any{"name": DefaultConfigName, "namespace": o.Namespace},
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": DefaultConfigName + "-" + o.Namespace},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": DefaultConfigName, "namespace": o.Namespace}},
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": DefaultConfigName, "namespace": o.Namespace, "labels": labels},
			"spec": map[string]any{
				"replicas": int64(1),
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{
						"serviceAccountName": DefaultConfigName,
						"containers": []any{map[string]any{
							"name": "manager", "image": o.Image,
							"args": []any{"--config", o.Namespace + "/" + DefaultConfigName},
						}},
					},
				},
			},
		}},
	)
	return objs, nil
}

// ParsePublicKeys reads every RSA public key (PKIX or PKCS#1 PEM blocks) of data.
func ParsePublicKeys(data []byte) ([]*rsa.PublicKey, error) {
	var out []*rsa.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if k, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
			rk, ok := k.(*rsa.PublicKey)
			if !ok {
				return nil, fmt.Errorf("PEM block %q: not an RSA key", block.Type)
			}
			out = append(out, rk)
			continue
		}
		k, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %q: not an RSA public key", block.Type)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM public key")
	}
	return out, nil
}

// LoadClusterConfig adds what the manager's ConfigMap (NAMESPACE/NAME) says to cfg: its public
// keys, plain-HTTP registries and registry Secret (unless cfg names one).
func LoadClusterConfig(ctx context.Context, kube kubernetes.Interface, ref string, cfg *Config) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return fmt.Errorf("manager config %q: want NAMESPACE/NAME", ref)
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("manager config %s not found (kyma alpha deploy --manager-public-key writes it): %w", ref, err)
	}
	if err != nil {
		return fmt.Errorf("read manager config %s: %w", ref, err)
	}
	if pemData := strings.TrimSpace(cm.Data[ConfigKeyPublicKeys]); pemData != "" {
		keys, err := ParsePublicKeys([]byte(pemData))
		if err != nil {
			return fmt.Errorf("manager config %s: %s: %w", ref, ConfigKeyPublicKeys, err)
		}
		cfg.PublicKeys = append(cfg.PublicKeys, keys...)
	}
	for _, h := range strings.Fields(cm.Data[ConfigKeyPlainHTTP]) {
		cfg.PlainHTTPRegistries = append(cfg.PlainHTTPRegistries, h)
	}
	sort.Strings(cfg.PlainHTTPRegistries)
	if cfg.RegistrySecret == "" {
		cfg.RegistrySecret = cm.Data[ConfigKeyRegistrySecret]
	}
	return nil
}
