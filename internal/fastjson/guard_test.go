package fastjson

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The crash pattern of go-json's unsynchronised decoder cache (before v0.12.0): many goroutines
// decoding a type none has decoded yet, all at once, as a restarted worker's first claims do.
// Each round uses new struct types, so every round's decodes are first decodes.
func TestConcurrentFirstDecodesOfNewTypes(t *testing.T) {
	const rounds, goroutines = 200, 16
	for r := 0; r < rounds; r++ {
		inner := reflect.StructOf([]reflect.StructField{
			{Name: "Steps", Type: reflect.TypeFor[[]string](), Tag: reflect.StructTag(fmt.Sprintf(`json:"steps_%d"`, r))},
		})
		typ := reflect.StructOf([]reflect.StructField{
			{Name: "N", Type: reflect.TypeFor[int](), Tag: `json:"n"`},
			{Name: "Inner", Type: reflect.PointerTo(inner), Tag: `json:"inner"`},
			{Name: "M", Type: reflect.MapOf(reflect.TypeFor[string](), inner), Tag: `json:"m"`},
		})
		doc := []byte(fmt.Sprintf(`{"n":%d,"inner":{"steps_%d":["a","b"]},"m":{"k":{"steps_%d":["c"]}}}`, r, r, r))
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				v := reflect.New(typ)
				if err := Unmarshal(doc, v.Interface()); err != nil {
					errs <- err
					return
				}
				got := v.Elem()
				if got.Field(0).Int() != int64(r) || got.Field(1).Elem().Field(0).Len() != 2 || got.Field(2).Len() != 1 {
					errs <- fmt.Errorf("round %d: decoded %+v", r, got.Interface())
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}
