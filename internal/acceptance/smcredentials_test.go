package acceptance

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	bt "github.com/kyma-project/kyma-environment-broker/internal/broker/brokertest"
	"github.com/kyma-project/kyma-environment-broker/internal/externals"
	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/standins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Service Manager credentials BTP passes in the context (sm_operator_credentials) are the
// ones EMS is provisioned and deprovisioned with; the broker's own are not used.
func TestEMSUsesTheContextsServiceManagerCredentials(t *testing.T) {
	b := bt.Start(t, bt.Options{Externals: func(c *externals.Config) { c.ServiceManager.ClientSecret = "not-the-sandbox-secret" }})
	creds := standins.DefaultCredentials()
	ctx := bt.SAPContext("ga-sm", "sa-sm")
	ctx["sm_operator_credentials"] = map[string]any{
		"clientid": creds.SMClientID, "clientsecret": creds.SMClientSecret, "xsappname": "keb",
		"sm_url": b.SandboxURL + "/servicemanager", "url": b.SandboxURL + "/servicemanager",
	}
	id := uuid.NewString()
	prov := b.Put(bt.InstancePath(id), bt.ProvisionBody(bt.AWSPlanID, bt.AWSParams("rt-sm"), ctx))
	require.Equal(t, http.StatusAccepted, prov.Status, prov.String())
	b.WaitSucceeded(id, prov.Operation())

	inv := readInventory(t, b.SandboxURL)
	require.Len(t, inv.SM.Instances, 1, "provisioned with the context's credentials")
	require.Len(t, inv.SM.Bindings, 1)
	for _, op := range b.Operations(id) {
		assert.NotContains(t, string(op.Data), creds.SMClientSecret, "the credentials are kept encrypted, not in the operation's data")
	}

	del := b.Delete(bt.DeprovisionPath(id, bt.AWSPlanID))
	require.Equal(t, http.StatusAccepted, del.Status)
	b.WaitSucceeded(id, del.Operation())
	inv = readInventory(t, b.SandboxURL)
	assert.Empty(t, inv.SM.Instances, "deprovisioned with the same credentials")
	assert.Empty(t, inv.SM.Bindings)
}
