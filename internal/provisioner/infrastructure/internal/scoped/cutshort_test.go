package scoped

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The wait's error keeps the API server's last answer when the final call only ran out of time.
func TestWaitForKeepsTheLastAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := waitFor(ctx, "the answer", func(ctx context.Context) (bool, error) {
		if d, _ := ctx.Deadline(); time.Until(d) < 150*time.Millisecond {
			return false, fmt.Errorf("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
		}
		return false, errors.New("not yet allowed its namespace (no RBAC policy matched)")
	})
	assert.ErrorContains(t, err, "waiting for the answer: not yet allowed its namespace")
}
