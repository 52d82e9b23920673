package runtimeagent

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resources the agent works with.
var (
	CompassConnectionGVR = schema.GroupVersionResource{Group: "compass.kyma-project.io", Version: "v1alpha1", Resource: "compassconnections"}
	ApplicationGVR       = schema.GroupVersionResource{Group: "applicationconnector.kyma-project.io", Version: "v1alpha1", Resource: "applications"}
)

// ConnectionState is status.connectionState of the CompassConnection (the seed's table).
type ConnectionState string

const (
	Connected                   ConnectionState = "Connected"
	ConnectionFailed            ConnectionState = "ConnectionFailed"
	ConnectionMaintenanceFailed ConnectionState = "ConnectionMaintenanceFailed"
	SynchronizationFailed       ConnectionState = "SynchronizationFailed"
	ResourceApplicationFailed   ConnectionState = "ResourceApplicationFailed"
	MetadataUpdateFailed        ConnectionState = "MetadataUpdateFailed"
	Synchronized                ConnectionState = "Synchronized"
)

// CompassConnection is the agent's cluster-scoped status resource.
type CompassConnection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CompassConnectionSpec   `json:"spec"`
	Status            CompassConnectionStatus `json:"status,omitempty"`
}

// CompassConnectionSpec holds the Compass URLs.
type CompassConnectionSpec struct {
	ManagementInfo        ManagementInfo `json:"managementInfo"`
	RefreshCredentialsNow bool           `json:"refreshCredentialsNow,omitempty"`
	ResyncNow             bool           `json:"resyncNow,omitempty"`
}

// ManagementInfo is the certificate-secured Connector URL and the Director URL.
type ManagementInfo struct {
	ConnectorURL string `json:"connectorUrl"`
	DirectorURL  string `json:"directorUrl"`
}

// CompassConnectionStatus is the seed's status table.
type CompassConnectionStatus struct {
	// State and ConnectionStatus are required by the CompassConnection CRD.
	State                 ConnectionState        `json:"connectionState"`
	ConnectionStatus      *ConnectionStatus      `json:"connectionStatus"`
	SynchronizationStatus *SynchronizationStatus `json:"synchronizationStatus,omitempty"`
}

// ConnectionStatus is the status of the connection with the Connector.
type ConnectionStatus struct {
	CertificateStatus CertificateStatus `json:"certificateStatus"`
	Established       *metav1.Time      `json:"established"`
	LastSuccess       *metav1.Time      `json:"lastSuccess"`
	LastSync          *metav1.Time      `json:"lastSync"`
	Renewed           *metav1.Time      `json:"renewed"`
	Error             string            `json:"error,omitempty"`
}

// CertificateStatus says when the certificate was acquired and its validity.
type CertificateStatus struct {
	Acquired  *metav1.Time `json:"acquired"`
	NotBefore *metav1.Time `json:"notBefore"`
	NotAfter  *metav1.Time `json:"notAfter"`
}

// SynchronizationStatus is the status of the synchronisation with the Director.
type SynchronizationStatus struct {
	LastAttempt               *metav1.Time `json:"lastAttempt"`
	LastSuccessfulFetch       *metav1.Time `json:"lastSuccessfulFetch"`
	LastSuccessfulApplication *metav1.Time `json:"lastSuccessfulApplication"`
	Error                     string       `json:"error,omitempty"`
}

// Application is an application the Director assigned to the runtime.
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ApplicationSpec `json:"spec"`
}

// ApplicationSpec mirrors the Director's application; credentials live in Secrets.
type ApplicationSpec struct {
	Description         string            `json:"description,omitempty"`
	DisplayName         string            `json:"displayName,omitempty"`
	ProviderDisplayName string            `json:"providerDisplayName,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	CompassMetadata     CompassMetadata   `json:"compassMetadata"`
	Services            []Service         `json:"services,omitempty"`
}

// CompassMetadata links the resource to the Director's application; the Application CRD
// requires authentication and its clientIds.
type CompassMetadata struct {
	ApplicationID  string         `json:"applicationId"`
	Authentication Authentication `json:"authentication"`
}

// Authentication lists the IDs of the application's system auths in the Director.
type Authentication struct {
	ClientIDs []string `json:"clientIds"`
}

// Service is one package (bundle) of the application; the Application CRD requires every field
// but Entries' content, so none is omitted when empty.
type Service struct {
	ID                  string  `json:"id"`
	Name                string  `json:"name"`
	DisplayName         string  `json:"displayName"`
	ProviderDisplayName string  `json:"providerDisplayName"`
	Description         string  `json:"description"`
	Entries             []Entry `json:"entries"`
}

// Entry of a service; its credentials are in the named Secret.
type Entry struct {
	Type        string       `json:"type"`
	Credentials *Credentials `json:"credentials,omitempty"`
}

// Credentials names the Secret holding a package's credentials for this runtime.
type Credentials struct {
	Type       string `json:"type"`
	SecretName string `json:"secretName"`
}

func toUnstructured(obj any, gvr schema.GroupVersionResource, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvr.GroupVersion().WithKind(kind))
	return u, nil
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("reading %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}
