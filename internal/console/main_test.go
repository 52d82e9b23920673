package console_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

// The first render of the runtimes page is measured on PostgreSQL too.
func TestMain(m *testing.M) { pgtest.Main(m) }
