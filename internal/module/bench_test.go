package module

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
)

// BenchmarkCreateSignPack: building, signing (RSA 2048) and packing the sample module.
func BenchmarkCreateSignPack(b *testing.B) {
	dir := b.TempDir()
	cfg, err := LoadConfig(moduletest.WriteSample(b, dir, "bench", "1.0.0"))
	if err != nil {
		b.Fatal(err)
	}
	key := newKey(b)
	b.ResetTimer()
	var size int64
	for i := 0; i < b.N; i++ {
		a, err := Create(context.Background(), CreateOptions{Config: cfg, Dir: filepath.Clean(dir), Registry: "registry.example"})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Sign("", key); err != nil {
			b.Fatal(err)
		}
		p, err := a.Pack()
		if err != nil {
			b.Fatal(err)
		}
		size = p.Size()
	}
	b.ReportMetric(float64(size), "artifact-bytes")
}
