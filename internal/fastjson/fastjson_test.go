package fastjson_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/fastjson"
	"github.com/kyma-project/kyma-environment-broker/internal/fastjson/fastjsontest"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Every document type fastjson decodes in the product: the processes' data and the secrets.
func TestDecodesLikeEncodingJSON(t *testing.T) {
	t.Run("provisioning", fastjsontest.RequireDecodesLikeStd[instance.ProvisioningData])
	t.Run("deprovisioning", fastjsontest.RequireDecodesLikeStd[instance.DeprovisioningData])
	t.Run("update", fastjsontest.RequireDecodesLikeStd[instance.UpdateData])
	t.Run("kyma upgrade", fastjsontest.RequireDecodesLikeStd[instance.UpgradeKymaData])
	t.Run("cluster upgrade", fastjsontest.RequireDecodesLikeStd[instance.UpgradeClusterData])
	t.Run("provisioner operation", fastjsontest.RequireDecodesLikeStd[operations.Data])
	t.Run("secrets", fastjsontest.RequireDecodesLikeStd[storage.Secrets])
}

// What encoding/json refuses, fastjson refuses with encoding/json's error.
func TestRefusesWithEncodingJSONsError(t *testing.T) {
	for _, doc := range []string{`{"a":`, `{"a":1}x`, `[1,2]`, `{"a":"\x01"}`, `{"a":"\ud800"}`, ``} {
		var want, got map[string]string
		wantErr := json.Unmarshal([]byte(doc), &want)
		gotErr := fastjson.Unmarshal([]byte(doc), &got)
		if wantErr == nil {
			require.NoError(t, gotErr, doc)
			assert.Equal(t, want, got, doc)
			continue
		}
		require.Error(t, gotErr, doc)
		assert.Equal(t, wantErr.Error(), gotErr.Error(), doc)
	}
}

// A provisioning's and its provisioner operation's data as a finished provisioning left them
// (the simulated backend and the embedded sandbox): what every claim of them decodes.
func BenchmarkDecodeData(b *testing.B) {
	for _, c := range []struct {
		name string
		file string
		new  func() any
	}{
		{"provisioning", "testdata/provisioning.json", func() any { return new(instance.ProvisioningData) }},
		{"provisioner_provision", "testdata/provisioner_provision.json", func() any { return new(operations.Data) }},
	} {
		doc, err := os.ReadFile(c.file)
		require.NoError(b, err)
		b.Run(c.name+"/encoding_json", func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, json.Unmarshal(doc, c.new()))
			}
		})
		b.Run(c.name+"/fastjson", func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, fastjson.Unmarshal(doc, c.new()))
			}
		})
	}
}

// The real documents decode the same with both.
func TestDecodesTheStoredDocumentsLikeEncodingJSON(t *testing.T) {
	for file, v := range map[string][2]any{
		"testdata/provisioning.json":          {new(instance.ProvisioningData), new(instance.ProvisioningData)},
		"testdata/provisioner_provision.json": {new(operations.Data), new(operations.Data)},
	} {
		doc, err := os.ReadFile(file)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(doc, v[0]))
		require.NoError(t, fastjson.Unmarshal(doc, v[1]))
		assert.Equal(t, v[0], v[1], file)
	}
}
