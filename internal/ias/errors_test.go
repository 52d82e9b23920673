package ias

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassify(t *testing.T) {
	for code, want := range map[int]bool{400: false, 401: false, 403: false, 404: false, 409: false, 429: true, 500: true, 502: true, 503: true} {
		temp, status := classify(&statusError{code: code})
		assert.Equal(t, want, temp, code)
		assert.Equal(t, code, status)
	}
	temp, _ := classify(&permanentError{errors.New("bad json")})
	assert.False(t, temp)
	temp, _ = classify(errors.New("connection reset by peer"))
	assert.True(t, temp)
}
