package runtimeagent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// AgentConfiguration is the content of the configuration Secret.
type AgentConfiguration struct {
	ConnectorURL, RuntimeID, Tenant, Token string
}

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
		return c, fmt.Errorf("the configuration Secret %s lacks one of CONNECTOR_URL, RUNTIME_ID, TENANT, TOKEN", ref)
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

// applySecret creates the Secret or replaces its data and labels.
func applySecret(ctx context.Context, core kubernetes.Interface, s *corev1.Secret) error {
	if err := ensureNamespace(ctx, core, s.Namespace); err != nil {
		return err
	}
	secrets := core.CoreV1().Secrets(s.Namespace)
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		var cur *corev1.Secret
		if cur, err = secrets.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
			cur.Data, cur.StringData, cur.Labels = s.Data, nil, s.Labels
			_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{FieldManager: fieldManager})
		}
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// storeCredentials writes the CA first, then the certificate and key together in one Secret,
// so a crash between leaves the previous certificate and key usable.
func storeCredentials(ctx context.Context, core kubernetes.Interface, certs, ca SecretRef, creds ClientCredentials) error {
	if err := applySecret(ctx, core, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ca.Name, Namespace: ca.Namespace, Labels: map[string]string{labelManagedBy: managedByAgent}},
		Data:       map[string][]byte{secretKeyCA: creds.CACertificate},
	}); err != nil {
		return err
	}
	return applySecret(ctx, core, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: certs.Name, Namespace: certs.Namespace, Labels: map[string]string{labelManagedBy: managedByAgent}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{secretKeyCertificate: creds.CertificateChain, secretKeyPrivateKey: creds.PrivateKey},
	})
}

// loadCredentials reads the stored certificate, key and CA; a missing Secret is an error.
func loadCredentials(ctx context.Context, core kubernetes.Interface, certs, ca SecretRef) (ClientCredentials, error) {
	c, err := core.CoreV1().Secrets(certs.Namespace).Get(ctx, certs.Name, metav1.GetOptions{})
	if err != nil {
		return ClientCredentials{}, fmt.Errorf("reading the client certificate Secret %s: %w", certs, err)
	}
	a, err := core.CoreV1().Secrets(ca.Namespace).Get(ctx, ca.Name, metav1.GetOptions{})
	if err != nil {
		return ClientCredentials{}, fmt.Errorf("reading the CA certificate Secret %s: %w", ca, err)
	}
	creds := ClientCredentials{CertificateChain: c.Data[secretKeyCertificate], PrivateKey: c.Data[secretKeyPrivateKey], CACertificate: a.Data[secretKeyCA]}
	if len(creds.CertificateChain) == 0 || len(creds.PrivateKey) == 0 || len(creds.CACertificate) == 0 {
		return ClientCredentials{}, fmt.Errorf("the Secrets %s and %s lack the certificate, key or CA", certs, ca)
	}
	return creds, nil
}
