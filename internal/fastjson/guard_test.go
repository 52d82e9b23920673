package fastjson

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type doc struct {
	Steps []string `json:"steps"`
	N     int      `json:"n"`
}

// A panic of the fast decoder (go-json's torn cache read) is an encoding/json decode, not a
// crash, and leaves nothing of the fast decoder's half-done work behind.
func TestAPanicOfTheFastDecoderFallsBack(t *testing.T) {
	d := &decoder{fast: func(b []byte, v any) error {
		v.(*doc).Steps = []string{"half done"}
		var typedNil *struct{ x int }
		_ = typedNil.x // what go-json's nil *structDecoder does
		return nil
	}}
	var got doc
	require.NoError(t, d.unmarshal([]byte(`{"n":3}`), &got))
	assert.Equal(t, doc{N: 3}, got)
	var bad doc
	var want doc
	assert.Equal(t, json.Unmarshal([]byte(`{"n":"x"}`), &want), d.unmarshal([]byte(`{"n":"x"}`), &bad), "encoding/json's error")
}

// A type's first decode runs alone; once it completed, decodes of the type run concurrently.
func TestATypesFirstDecodeRunsAlone(t *testing.T) {
	var running, most atomic.Int32
	d := &decoder{fast: func(b []byte, v any) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return json.Unmarshal(b, v)
	}}
	decodeAtOnce := func() {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var got doc
				assert.NoError(t, d.unmarshal([]byte(`{"steps":["a"]}`), &got))
				assert.Equal(t, []string{"a"}, got.Steps)
			}()
		}
		close(start)
		wg.Wait()
	}
	// All eight miss the type at once: they decode one by one.
	decodeAtOnce()
	assert.Equal(t, int32(1), most.Load(), "decodes of a type not yet decoded are serialised")
	most.Store(0)
	decodeAtOnce()
	assert.Greater(t, most.Load(), int32(1), "a known type's decodes are not serialised")
}
