package durability

import (
	"context"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver"
	"github.com/sirupsen/logrus"
)

func openStore(ctx context.Context, url string, log logrus.FieldLogger) (storage.Store, error) {
	return driver.Open(ctx, driver.Config{Driver: driver.Postgres, URL: url, SecretKey: strings.Repeat("k", 32), MaxOpenConns: 20}, log)
}
