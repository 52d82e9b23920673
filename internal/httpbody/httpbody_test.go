package httpbody_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/httpbody"
)

// Whatever length is announced, the whole body is read, and a reader's error is returned.
func TestReadReadsTheWholeBodyWhateverItAnnounces(t *testing.T) {
	body := strings.Repeat("0123456789", 100)
	for _, size := range []int64{-1, 0, 1, 999, 1000, 1001, 5000} {
		for _, limit := range []int64{0, 10, 1 << 20} {
			got, err := httpbody.Read(iotest.OneByteReader(strings.NewReader(body)), size, limit)
			require.NoError(t, err, "size %d limit %d", size, limit)
			assert.Equal(t, body, string(got), "size %d limit %d", size, limit)
		}
	}
	empty, err := httpbody.Read(strings.NewReader(""), 10, 0)
	require.NoError(t, err)
	assert.Empty(t, empty)

	boom := errors.New("boom")
	for _, size := range []int64{-1, 3, 100} {
		got, err := httpbody.Read(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), size, 0)
		assert.ErrorIs(t, err, boom, "size %d", size)
		assert.Equal(t, "abc", string(got), "size %d", size)
	}
}
