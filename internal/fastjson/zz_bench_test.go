package fastjson_test

import (
	"encoding/json"
	"os"
	"testing"

	gojson "github.com/goccy/go-json"

	"github.com/kyma-project/kyma-environment-broker/internal/instance"
)

func BenchmarkZZEncode(b *testing.B) {
	doc, _ := os.ReadFile("testdata/provisioning.json")
	var v instance.ProvisioningData
	if err := json.Unmarshal(doc, &v); err != nil {
		b.Fatal(err)
	}
	b.Run("std", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			json.Marshal(&v)
		}
	})
	b.Run("gojson", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			gojson.Marshal(&v)
		}
	})
	x, _ := json.Marshal(&v)
	y, _ := gojson.Marshal(&v)
	b.Logf("equal=%v len=%d", string(x) == string(y), len(x))
}
