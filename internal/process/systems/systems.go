// Package systems is what the broker's steps need of the external systems, as narrow interfaces
// the real clients (internal/avs, ias, edp, servicemanager, eventhubs, reconciler, director)
// satisfy and step tests fake. A nil system is a disabled one: its steps are skipped.
package systems

import (
	"context"
	"fmt"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/ias"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/servicemanager"
	"github.com/kyma-project/kyma-environment-broker/internal/hyperscaler"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/client"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/gqlschema"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// AVS creates, tags, unlinks and deletes evaluations.
type AVS interface {
	CreateEvaluation(ctx context.Context, req *avs.EvaluationRequest) (*avs.Evaluation, error)
	GetEvaluation(ctx context.Context, id int64) (*avs.Evaluation, error)
	AddTag(ctx context.Context, id int64, tag avs.Tag) (*avs.Evaluation, error)
	RemoveParent(ctx context.Context, parentID, childID int64) error
	DeleteEvaluation(ctx context.Context, id int64) error
}

// AVSSettings are the evaluations' fixed attributes.
type AVSSettings struct {
	ParentID               int64
	InternalTesterAccessID int64
	ExternalTesterAccessID int64
	GroupID                int64
	// TagClassIDs are the AVS tag classes AVS_Tags uses.
	ShootNameTagClassID  int64
	RuntimeIDTagClassID  int64
	InstanceIDTagClassID int64
}

// IAS manages the runtime's service provider.
type IAS interface {
	CreateServiceProvider(ctx context.Context, name string) (*ias.ServiceProvider, error)
	GenerateSecret(ctx context.Context, id string) (clientID, clientSecret string, err error)
	GenerateFirstSecret(ctx context.Context, id string) (clientID, clientSecret string, err error)
	ConfigureOIDC(ctx context.Context, id string, redirectURIs []string) error
	DeleteServiceProvider(ctx context.Context, id string) error
}

// EDP registers runtimes with the Event Data Platform.
type EDP interface {
	RegisterRuntime(ctx context.Context, subaccountID string, metadata map[string]string) error
	DeregisterRuntime(ctx context.Context, subaccountID string) error
}

// ServiceManager provisions and binds Enterprise Messaging instances.
type ServiceManager interface {
	DefaultCredentials() (servicemanager.Credentials, bool)
	ProvisionInstance(ctx context.Context, creds servicemanager.Credentials, req servicemanager.InstanceRequest) (*servicemanager.Instance, error)
	GetInstance(ctx context.Context, creds servicemanager.Credentials, id string) (*servicemanager.Instance, error)
	Bind(ctx context.Context, creds servicemanager.Credentials, req servicemanager.BindingRequest) (*servicemanager.Binding, error)
	Unbind(ctx context.Context, creds servicemanager.Credentials, bindingID string) error
	DeprovisionInstance(ctx context.Context, creds servicemanager.Credentials, instanceID string) error
}

// SMCredentials are the Service Manager credentials of an operation: the ones the platform passed
// in the instance's context (kept in the operation's secrets), else the broker's default ones.
func (s Systems) SMCredentials(secrets storage.Secrets) (servicemanager.Credentials, bool) {
	if s.ServiceManager == nil {
		return servicemanager.Credentials{}, false
	}
	if c, ok := instance.SMCredentialsFrom(secrets); ok {
		return servicemanager.Credentials{ClientID: c.ClientID, ClientSecret: c.ClientSecret, URL: c.URL, TokenURL: c.TokenURL}, true
	}
	return s.ServiceManager.DefaultCredentials()
}

// Reconciler installs Kyma 2.x on a cluster.
type Reconciler interface {
	ApplyClusterConfig(ctx context.Context, cluster reconciler.Cluster) (*reconciler.State, error)
	GetStatus(ctx context.Context, runtimeID string) (*reconciler.State, error)
	DeleteCluster(ctx context.Context, runtimeID string) error
}

// Director knows the runtime's console URL.
type Director interface {
	GetConsoleURL(ctx context.Context, tenant, runtimeID string) (string, error)
}

// Systems are the broker's external systems; nil ones are disabled.
type Systems struct {
	AVS         AVS
	AVSSettings AVSSettings
	IAS         IAS
	EDP         EDP
	// EDPEnvironment is the environment of the runtimes' data tenants (APP_EDP_ENVIRONMENT).
	EDPEnvironment string
	ServiceManager ServiceManager
	EventHubs      eventhubs.Namespaces
	Reconciler     Reconciler
	Director       Director
	// AccountPool hands out the hyperscaler accounts (nil: Resolve_Target_Secret fails);
	// AccountRules say which kind of account a runtime needs.
	AccountPool  hyperscaler.Pool
	AccountRules hyperscaler.Rules
	// RetryTime bounds how long a provisioning or upgrade step keeps retrying a system that
	// answers with temporary errors before the operation fails.
	RetryTime time.Duration
	// CleanupRetryTime is the same for deprovisioning steps, which then give up without failing
	// (seed 001: at most 5 minutes).
	CleanupRetryTime time.Duration
}

// Temporary tells whether a system's error may go away on retry: a client's *clientkit.Error says
// so itself; any other failure not marked clientkit.Permanent counts as temporary.
func Temporary(err error) bool { return clientkit.Retryable(err) }

// NotFound tells whether a system answered that the object does not exist.
func NotFound(err error) bool { return clientkit.IsNotFound(err) }

// Failure names the system in an error: the operation's description then says which system
// failed, next to the step's name the engine adds.
func Failure(system string, err error) string { return fmt.Sprintf("%s: %v", system, err) }

// Retry is a provisioning or upgrade step's answer to a system's error: a temporary one is retried
// every interval until the step has tried for RetryTime, a permanent one fails the operation at
// once. Either way the description names the system and the step.
func (s Systems) Retry(op Step, system, what string, err error, interval time.Duration) (time.Duration, error) {
	msg := Failure(system, fmt.Errorf("%s: %w", what, err))
	if !Temporary(err) {
		return 0, fmt.Errorf("%s: step %s failed", msg, op.CurrentStep())
	}
	return op.Retry(msg, interval, s.RetryTime)
}

// Cleanup is a deprovisioning step's answer to a system's error: a temporary one is retried until
// the step has tried for CleanupRetryTime; a permanent one (400, 401/403, a 404 where the object
// must exist, a request that cannot be built), which waiting will not change, at once; then the step
// is recorded as executed but not completed with the system's answer, and the operation goes on
// (seed 001: no deprovisioning step blocks the operation).
func (s Systems) Cleanup(op Step, system, what string, err error, interval time.Duration) time.Duration {
	msg := Failure(system, fmt.Errorf("%s: %w", what, err))
	if !Temporary(err) {
		op.NotCompleted(msg)
		return 0
	}
	return op.RetryWithoutFail(msg, interval, s.CleanupRetryTime)
}

// AwaitProvisioner is a step's wait for a Runtime Provisioner operation: a wait > 0 to poll again
// (a failure to read the operation noted on op; an embedded provisioner's operation wakes op when
// it finishes, so its polls back off further), the provisioner's reason when the operation
// failed, and (0, nil) once it succeeded. What a succeeded operation left behind (its steps not
// completed, e.g. a Director that failed for good) makes this step not completed too, with the
// provisioner's words, so that the operation's description says what was left and where.
func AwaitProvisioner(ctx context.Context, p client.Client, op Step, tenant, operationID string, poll time.Duration) (time.Duration, error) {
	st, err := p.RuntimeOperationStatus(ctx, tenant, operationID)
	if err != nil {
		op.SetLastError(fmt.Sprintf("reading the provisioner's operation: %v", err))
		return poll, nil
	}
	return AwaitProvisionerStatus(p, op, st, poll)
}

// AwaitProvisionerStatus is AwaitProvisioner on a status the step already has (the provisioner's
// answer to the request the same run made).
func AwaitProvisionerStatus(p client.Client, op Step, st *gqlschema.OperationStatus, poll time.Duration) (time.Duration, error) {
	op.SetLastError("")
	done, err := client.Outcome(st)
	if err != nil {
		return 0, err
	}
	if !done {
		if s, ok := p.(client.Signaling); ok && s.SignalsFinishedOperations() {
			key := "" // signalled, but not in memory, without the operation's ID
			if st.ID != nil && *st.ID != "" {
				key = client.FinishedSignal(*st.ID)
			}
			op.WaitIsSignaledBy(key)
		}
		return poll, nil
	}
	if left := client.LeftBehind(st); left != "" {
		op.NotCompleted("Runtime Provisioner: not completed: " + left)
	}
	return 0, nil
}

// AwaitReconciler is a step's wait for the reconciler to install the applied configuration
// version of a cluster (or a later one): poll again while it works, fail when it reports an error,
// retry a failing reconciler within the retry window.
func (s Systems) AwaitReconciler(ctx context.Context, op Step, runtimeID string, applied int64, poll time.Duration) (time.Duration, error) {
	st, err := s.Reconciler.GetStatus(ctx, runtimeID)
	if err != nil {
		return s.Retry(op, "Reconciler", "reading the cluster's status", err, poll)
	}
	wait, err := ReconcileOutcome(st, applied)
	if err != nil {
		return 0, fmt.Errorf("Reconciler: %w (step %s)", err, op.CurrentStep())
	}
	if wait {
		op.SetLastError("Reconciler: cluster is " + st.Status)
		return poll, nil
	}
	op.SetLastError("")
	return 0, nil
}

// ReconcileOutcome reads a cluster's status: wait while the reconciler works on it (a retryable
// error included, which the reconciler retries itself), an error when it failed for good, done when the applied configuration (or a later one) is ready.
func ReconcileOutcome(st *reconciler.State, applied int64) (wait bool, err error) {
	switch st.Status {
	case reconciler.StatusReady:
		if st.ConfigurationVersion < applied {
			return true, nil // the status is of an older configuration
		}
		return false, nil
	case reconciler.StatusReconcilePending, reconciler.StatusReconciling:
		return true, nil
	case reconciler.StatusReconcileErrorRetryable:
		return true, nil // the reconciler retries by itself; its next status tells

	case reconciler.StatusError:
		return false, fmt.Errorf("installing Kyma failed (configuration version %d)", st.ConfigurationVersion)
	default:
		return false, fmt.Errorf("unexpected cluster status %q", st.Status)
	}
}

// Step is the part of a process.Operation the helpers use; steps pass a pointer to their
// operation so the helpers can record the error on it.
type Step interface {
	SetLastError(msg string)
	CurrentStep() string
	Retry(msg string, interval, maxTime time.Duration) (time.Duration, error)
	RetryWithoutFail(msg string, interval, maxTime time.Duration) time.Duration
	NotCompleted(msg string)
	// WaitIsSignaledBy: what the step waits for wakes the operation when done (its polls back
	// off further); a key signals it in process too (engine.Signals).
	WaitIsSignaledBy(key string)
}
