package durablesql

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPrefixEnd(t *testing.T) {
	for prefix, want := range map[string]string{"a\x1f": "a ", "ab": "ac", "x~": "x\x7f"} {
		got, ok := prefixEnd(prefix)
		assert.True(t, ok, prefix)
		assert.Equal(t, want, got, prefix)
	}
	for _, prefix := range []string{"", "ü", "a\x7f"} {
		_, ok := prefixEnd(prefix)
		assert.False(t, ok, "%q has no byte-order range", prefix)
	}
}
