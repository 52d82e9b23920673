package runtimeagent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Reasons of the Events the agent records on the CompassConnection besides its states (whose
// reason is the new state).
const (
	ReasonExpiresWithoutRenewal = "CertificateExpiresWithoutRenewal"
	ReasonIdentity              = "RuntimeIdentity"
)

// newRecorder records Events through core; stop flushes and ends it. The CompassConnection is
// cluster-scoped, so its Events are in the default namespace.
func newRecorder(core kubernetes.Interface) (record.EventRecorder, func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fieldManager}), b.Shutdown
}

func connectionRef(conn *CompassConnection) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: CompassConnectionGVR.GroupVersion().String(), Kind: "CompassConnection",
		Name: conn.Name, UID: conn.UID, ResourceVersion: conn.ResourceVersion}
}

// report publishes the state st the CompassConnection conn was written with, having been in
// prev: the metrics always, an Event when the state changed.
func (a *Agent) report(prev ConnectionState, conn *CompassConnection, st CompassConnectionStatus) {
	a.metrics.setState(st.State)
	cs := st.ConnectionStatus
	if cs != nil && cs.CertificateStatus.NotAfter != nil {
		a.metrics.setNotAfter(cs.CertificateStatus.NotAfter.Time)
	}
	if a.events == nil || conn == nil || prev == st.State {
		return
	}
	kind, msg := corev1.EventTypeWarning, ""
	switch {
	case cs != nil && cs.Error != "" && (st.State == ConnectionFailed || st.State == ConnectionMaintenanceFailed):
		msg = cs.Error
	case st.SynchronizationStatus != nil && st.SynchronizationStatus.Error != "":
		msg = st.SynchronizationStatus.Error
	}
	switch st.State {
	case Connected, Synchronized:
		kind = corev1.EventTypeNormal
		if msg == "" {
			msg = fmt.Sprintf("%s (was %s)", st.State, orNone(prev))
		}
	}
	if msg == "" {
		msg = string(st.State)
	}
	a.events.Event(connectionRef(conn), kind, string(st.State), msg)
}

func orNone(s ConnectionState) string {
	if s == "" {
		return "none"
	}
	return string(s)
}
