package provisioning

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/overrides"
	"github.com/sirupsen/logrus"
)

// ProvisionEventHubs creates the Azure Event Hubs namespace (a managed Kafka) that Kyma 1.x
// eventing of an Azure runtime uses, and gives its credentials to the Kafka channel component.
type ProvisionEventHubs struct{ Deps }

func (ProvisionEventHubs) Name() string { return "Provision Azure Event Hubs" }

// Overrides of Kyma 1.x's Kafka channel.
const (
	KafkaComponent   = "knative-eventing-kafka"
	KafkaBrokersKey  = "kafka.brokers"
	KafkaUsernameKey = "kafka.username"
	KafkaPasswordKey = "kafka.password"
	KafkaProviderKey = "environment.kafkaProvider"
)

// EventHubNames are the resource group and namespace an operation creates: derived from its ID (a
// retry asks for the same ones, a resumed trial gets new ones) and within Azure's name rules.
func EventHubNames(operationID string) (resourceGroup, namespace string) {
	sum := sha1.Sum([]byte(operationID))
	h := hex.EncodeToString(sum[:])[:24]
	return "kyma-eventhubs-" + h, "kyma" + h
}

func (s ProvisionEventHubs) Run(ctx context.Context, op Op, log logrus.FieldLogger) (Op, time.Duration, error) {
	res := &op.Data.Resources
	// Asked on every run until the namespace is ready: once it exists this is a read. While Azure
	// creates it asynchronously, a run is one request about that operation, whose URLs the
	// operation keeps (a run after a restart follows the same one; without them the PUT, which is
	// idempotent, is sent again).
	rg, name := EventHubNames(op.ID)
	req := eventhubs.NamespaceRequest{
		ResourceGroup: rg, Name: name, Region: op.Data.Parameters.Region,
		Tags: map[string]string{"InstanceID": op.InstanceID, "SubAccountID": op.Data.Context.SubAccountID},
	}
	if res.EventHubAsyncOperation != "" || res.EventHubLocation != "" {
		req.Operation = &eventhubs.Operation{AsyncOperation: res.EventHubAsyncOperation, Location: res.EventHubLocation}
	}
	ns, err := s.Systems.EventHubs.EnsureNamespace(ctx, req)
	if err != nil {
		wait, err := s.Systems.Retry(&op, "Azure Event Hubs", "creating the namespace", err, s.PollInterval)
		return op, wait, err
	}
	if res.EventHubNamespace == "" {
		log.WithFields(logrus.Fields{"resource_group": rg, "namespace": ns.Name}).Info("Event Hubs namespace created")
	}
	res.EventHubResourceGroup, res.EventHubNamespace = rg, ns.Name
	res.EventHubAsyncOperation, res.EventHubLocation = "", ""
	if lro := ns.Operation; lro != nil {
		res.EventHubAsyncOperation, res.EventHubLocation = lro.AsyncOperation, lro.Location
		op.LastError = "waiting for Azure to create the Event Hubs namespace: " + ns.ProvisioningState
		return op, ns.RetryAfter, nil
	}
	if ns.ProvisioningState != eventhubs.StateSucceeded {
		op.LastError = "waiting for the Event Hubs namespace to be ready: " + ns.ProvisioningState
		wait := s.PollInterval
		if ns.RetryAfter > 0 {
			wait = ns.RetryAfter // accepted without URLs to follow: look again when Azure says
		}
		return op, wait, nil
	}
	conn, err := s.Systems.EventHubs.ConnectionString(ctx, res.EventHubResourceGroup, res.EventHubNamespace)
	if err != nil {
		wait, err := s.Systems.Retry(&op, "Azure Event Hubs", "reading the namespace's connection string", err, s.PollInterval)
		return op, wait, err
	}
	op.Data.Overrides.Set(&op.Secrets, KafkaComponent,
		overrides.Entry{Key: KafkaBrokersKey, Value: res.EventHubNamespace + ".servicebus.windows.net:9093"},
		overrides.Entry{Key: KafkaUsernameKey, Value: "$ConnectionString"},
		overrides.Entry{Key: KafkaPasswordKey, Value: conn, Secret: true},
		overrides.Entry{Key: KafkaProviderKey, Value: "azure"})
	op.LastError = ""
	return op, 0, nil
}
