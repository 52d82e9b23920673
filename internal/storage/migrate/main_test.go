package migrate_test

import (
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
