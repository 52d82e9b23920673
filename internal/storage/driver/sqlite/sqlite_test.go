package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/driver/sqlite"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/encryption"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/sqlstore"
	"github.com/kyma-project/kyma-environment-broker/internal/storage/storagetest"
)

func opener(t *testing.T) storagetest.Opener {
	path := filepath.Join(t.TempDir(), "keb.db")
	return func(t *testing.T, kr *encryption.Keyring) storage.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path}, kr, nil)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, opener)
}

func TestMigrateAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keb.db")
	v, err := sqlite.Migrate(context.Background(), sqlite.Config{Path: path}, nil)
	require.NoError(t, err)
	latest, err := sqlstore.LatestVersion(sqlite.Migrations())
	require.NoError(t, err)
	require.Equal(t, latest, v)
	v2, err := sqlite.Migrate(context.Background(), sqlite.Config{Path: path}, nil)
	require.NoError(t, err)
	require.Equal(t, v, v2)
}

// Many concurrent writers on one store never see SQLITE_BUSY.
func TestConcurrentWritersNoBusy(t *testing.T) {
	s := opener(t)(t, storagetest.Keyring(t, storagetest.Key(t)))
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				now := time.Now()
				op, err := s.Operations().InsertOperation(ctx, storage.Operation{ID: fmt.Sprintf("op-%d-%d", w, i), InstanceID: "i",
					Type: "provision", State: storage.StatePending, DueAt: &now, Secrets: storage.Secrets{"a": "b"}})
				if err != nil {
					errs <- err
					continue
				}
				got, err := s.Operations().ClaimOperations(ctx, storage.ClaimRequest{Owner: fmt.Sprint("w", w), Now: now.Add(time.Second), LeaseUntil: now.Add(time.Minute), Limit: 2})
				if err != nil {
					errs <- err
				}
				for _, o := range got {
					o.Description = "x"
					if _, err := s.Operations().SaveProgress(ctx, o, storage.Save{}, []storage.Event{{Step: "s", Type: storage.EventStarted}}); err != nil {
						errs <- err
					}
				}
				if _, err := s.Operations().GetOperation(ctx, op.ID); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
