package clientkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckURLAndRequireNameTheVariable(t *testing.T) {
	assert.NoError(t, CheckURL("APP_X_URL", "https://x.example/api"))
	assert.EqualError(t, CheckURL("APP_X_URL", ""), "APP_X_URL is required")
	for _, bad := range []string{"x.example", "ftp://x.example", "http://", "://"} {
		assert.EqualError(t, CheckURL("APP_X_URL", bad), "APP_X_URL must be an absolute http(s) URL", bad)
	}
	assert.NoError(t, Require("APP_X_ID", "id"))
	assert.EqualError(t, Require("APP_X_ID", ""), "APP_X_ID is required")
}
