package runtimeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

const fieldManager = "compass-runtime-agent"

// Labels on everything the agent creates, so it only ever changes its own resources.
const (
	labelManagedBy   = "app.kubernetes.io/managed-by"
	labelRuntimeID   = "compass.kyma-project.io/runtime-id"
	labelApplication = "applicationconnector.kyma-project.io/application"
	managedByAgent   = "compass-runtime-agent"
)

// Annotations on the CompassConnection with what the agent needs after a restart.
const (
	annotationRuntimeID = "compass.kyma-project.io/runtime-id"
	annotationTenant    = "compass.kyma-project.io/tenant"
)

// Annotations of the certificates Secret: the connection its certificate is, so that the
// certificate alone restores a lost CompassConnection, and the one-time token it was obtained
// with (its SHA-256), so that a spent token is never used again while the certificate is valid.
const (
	annotationTokenHash           = "compass.kyma-project.io/token-sha256"
	annotationConnectorURL        = "compass.kyma-project.io/connector-url"
	annotationDirectorURL         = "compass.kyma-project.io/director-url"
	annotationConfiguredRuntimeID = "compass.kyma-project.io/configured-runtime-id"
	// annotationNextTokenOf is the SHA-256 of the configuration Secret's token whose next token
	// (handed out by the Connector's configuration query) is kept under secretKeyNextToken until
	// a certificate is signed with it.
	annotationNextTokenOf = "compass.kyma-project.io/next-token-of"
	secretKeyNextToken    = "next-token"
)

// connectionRecord is what the certificates Secret says about its certificate's connection.
type connectionRecord struct {
	TokenHash, ConnectorURL, DirectorURL, Tenant, ConfiguredRuntimeID string
}

func (r connectionRecord) annotations() map[string]string {
	return map[string]string{annotationTokenHash: r.TokenHash, annotationConnectorURL: r.ConnectorURL, annotationDirectorURL: r.DirectorURL,
		annotationTenant: r.Tenant, annotationConfiguredRuntimeID: r.ConfiguredRuntimeID}
}

func recordOf(ann map[string]string) connectionRecord {
	return connectionRecord{TokenHash: ann[annotationTokenHash], ConnectorURL: ann[annotationConnectorURL], DirectorURL: ann[annotationDirectorURL],
		Tenant: ann[annotationTenant], ConfiguredRuntimeID: ann[annotationConfiguredRuntimeID]}
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// AgentConfiguration is the content of the configuration Secret.
type AgentConfiguration struct {
	ConnectorURL, RuntimeID, Tenant, Token string
}

// errIncompleteConfiguration: the configuration Secret has no token (or lacks what goes with it).
var errIncompleteConfiguration = errors.New("lacks one of CONNECTOR_URL, RUNTIME_ID, TENANT, TOKEN")

func readAgentConfiguration(ctx context.Context, core kubernetes.Interface, ref SecretRef) (AgentConfiguration, error) {
	s, err := core.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return AgentConfiguration{}, fmt.Errorf("reading the configuration Secret %s: %w", ref, err)
	}
	c := AgentConfiguration{
		ConnectorURL: string(s.Data["CONNECTOR_URL"]), RuntimeID: string(s.Data["RUNTIME_ID"]),
		Tenant: string(s.Data["TENANT"]), Token: string(s.Data["TOKEN"]),
	}
	if c.ConnectorURL == "" || c.RuntimeID == "" || c.Tenant == "" || c.Token == "" {
		return c, fmt.Errorf("the configuration Secret %s %w", ref, errIncompleteConfiguration)
	}
	return c, nil
}

// ensureNamespace creates the namespace if it does not exist.
func ensureNamespace(ctx context.Context, core kubernetes.Interface, name string) error {
	_, err := core.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading namespace %s: %w", name, err)
	}
	_, err = core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// applySecret creates the Secret or replaces its data and labels (its namespace exists).
func applySecret(ctx context.Context, core kubernetes.Interface, s *corev1.Secret) error {
	secrets := core.CoreV1().Secrets(s.Namespace)
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		var cur *corev1.Secret
		if cur, err = secrets.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
			cur.Data, cur.StringData, cur.Labels = s.Data, nil, s.Labels
			if s.Annotations != nil {
				cur.Annotations = s.Annotations
			}
			_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{FieldManager: fieldManager})
		}
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// storeCredentials writes the CA first, then the certificate and key together in one Secret with
// the record of their connection, so a crash between leaves the previous certificate and key
// usable. A next token kept for the signing is dropped with it: the certificate replaces it.
func storeCredentials(ctx context.Context, core kubernetes.Interface, certs, ca SecretRef, creds ClientCredentials, rec connectionRecord) error {
	for _, ns := range []string{ca.Namespace, certs.Namespace} {
		if err := ensureNamespace(ctx, core, ns); err != nil {
			return err
		}
	}
	if err := applySecret(ctx, core, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ca.Name, Namespace: ca.Namespace, Labels: map[string]string{labelManagedBy: managedByAgent}},
		Data:       map[string][]byte{secretKeyCA: creds.CACertificate},
	}); err != nil {
		return err
	}
	return applySecret(ctx, core, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: certs.Name, Namespace: certs.Namespace, Labels: map[string]string{labelManagedBy: managedByAgent}, Annotations: rec.annotations()},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{secretKeyCertificate: creds.CertificateChain, secretKeyPrivateKey: creds.PrivateKey},
	})
}

// loadCredentials reads the stored certificate, key, CA and the record of their connection; a
// missing Secret is an error.
func loadCredentials(ctx context.Context, core kubernetes.Interface, certs, ca SecretRef) (ClientCredentials, connectionRecord, error) {
	c, err := core.CoreV1().Secrets(certs.Namespace).Get(ctx, certs.Name, metav1.GetOptions{})
	if err != nil {
		return ClientCredentials{}, connectionRecord{}, fmt.Errorf("reading the client certificate Secret %s: %w", certs, err)
	}
	rec := recordOf(c.Annotations)
	a, err := core.CoreV1().Secrets(ca.Namespace).Get(ctx, ca.Name, metav1.GetOptions{})
	if err != nil {
		return ClientCredentials{}, rec, fmt.Errorf("reading the CA certificate Secret %s: %w", ca, err)
	}
	creds := ClientCredentials{CertificateChain: c.Data[secretKeyCertificate], PrivateKey: c.Data[secretKeyPrivateKey], CACertificate: a.Data[secretKeyCA]}
	if len(creds.CertificateChain) == 0 || len(creds.PrivateKey) == 0 || len(creds.CACertificate) == 0 {
		return ClientCredentials{}, rec, fmt.Errorf("the Secrets %s and %s lack the certificate, key or CA", certs, ca)
	}
	return creds, rec, nil
}

// nextToken is the next token kept for the configuration token of hash tokenHash, if any.
func nextToken(ctx context.Context, core kubernetes.Interface, certs SecretRef, tokenHash string) (string, bool, error) {
	c, err := core.CoreV1().Secrets(certs.Namespace).Get(ctx, certs.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the client certificate Secret %s: %w", certs, err)
	}
	next := string(c.Data[secretKeyNextToken])
	return next, next != "" && c.Annotations[annotationNextTokenOf] == tokenHash, nil
}

// keepNextToken stores the next token of the configuration token of hash tokenHash in the
// certificates Secret, beside the certificate if there is one, before it is used: a failed
// signing can then be tried again with it, even after a restart.
func keepNextToken(ctx context.Context, core kubernetes.Interface, certs SecretRef, tokenHash, next string) error {
	if err := ensureNamespace(ctx, core, certs.Namespace); err != nil {
		return err
	}
	secrets := core.CoreV1().Secrets(certs.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := secrets.Get(ctx, certs.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: certs.Name, Namespace: certs.Namespace, Labels: map[string]string{labelManagedBy: managedByAgent},
					Annotations: map[string]string{annotationNextTokenOf: tokenHash}},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{secretKeyNextToken: []byte(next)},
			}, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("secrets"), certs.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cur.Data == nil {
			cur.Data = map[string][]byte{}
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Data[secretKeyNextToken], cur.Annotations[annotationNextTokenOf] = []byte(next), tokenHash
		_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("keeping the next one-time token in Secret %s: %w", certs, err)
	}
	return nil
}
