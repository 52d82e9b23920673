package operations

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCleanupGivesUpInsideItsStageLimit(t *testing.T) {
	assert.Equal(t, 5*time.Minute, cleanupRetryTime(20*time.Minute))
	assert.Equal(t, 3*time.Minute, cleanupRetryTime(4*time.Minute))
}
