package main

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestMigrateCommand runs the built broker's `migrate` verbs against SQLite and PostgreSQL:
// up (also with no verb), version, down [N] (refusing to go below 0), and the recovery of a
// failed migration (version shows dirty, force clears it).
func TestMigrateCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the broker")
	}
	bin := filepath.Join(t.TempDir(), "broker")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = os.Environ()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var env []string
			var db *sql.DB
			if dialect == "postgres" {
				u := pgtest.NewDatabase(t)
				env = []string{"APP_DATABASE_DRIVER=postgres", "APP_DATABASE_URL=" + u}
				db, err = sql.Open("postgres", u)
			} else {
				path := filepath.Join(t.TempDir(), "keb.db")
				env = []string{"APP_DATABASE_DRIVER=sqlite", "APP_DATABASE_PATH=" + path}
				db, err = sql.Open("sqlite", path)
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			run := func(wantOK bool, args ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, append([]string{"migrate"}, args...)...)
				cmd.Env = append(os.Environ(), env...)
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				if wantOK {
					require.NoError(t, err, "migrate %v: %s", args, stderr.String())
				} else {
					require.Error(t, err, "migrate %v should fail: %s", args, stdout.String())
				}
				return stdout.String() + stderr.String()
			}

			assert.Contains(t, run(true), "schema_version=100", "no verb means up")
			assert.Contains(t, run(true, "version"), "schema_version=100 dirty=false")
			assert.Contains(t, run(true, "down"), "schema_version=99")
			assert.Contains(t, run(true, "down", "2"), "schema_version=97")
			assert.Contains(t, run(true, "up"), "schema_version=100")
			assert.Contains(t, run(false, "down", "28"), "only 27 migration(s) applied", "below 0 is refused")
			assert.Contains(t, run(true, "version"), "schema_version=100 dirty=false", "a refused down undoes nothing")
			assert.Contains(t, run(true, "down", "27"), "schema_version=0")
			assert.Contains(t, run(false, "down"), "only 0 migration(s) applied")
			assert.Contains(t, run(true, "up"), "schema_version=100")

			// 0099 adds runtimes.kubeconfig: with the column there already it fails.
			assert.Contains(t, run(true, "down", "2"), "schema_version=98")
			kind := "BLOB"
			if dialect == "postgres" {
				kind = "BYTEA"
			}
			_, err := db.Exec("ALTER TABLE runtimes ADD COLUMN kubeconfig " + kind)
			require.NoError(t, err)
			run(false, "up")
			assert.Contains(t, run(true, "version"), "schema_version=99 dirty=true")
			run(false, "down") // a dirty line is repaired first
			assert.Contains(t, run(true, "force", "99"), "schema_version=99 dirty=false")
			assert.Contains(t, run(true, "version"), "schema_version=99 dirty=false")
			assert.Contains(t, run(true, "down"), "schema_version=98", "the forced version is undone as any other")
			assert.Contains(t, run(true), "schema_version=100")
			run(false, "force", "x")
			run(false, "down", "0")

			// The sandbox's tables are a line of their own: moving it leaves the broker's alone.
			assert.Contains(t, run(true, "--line", "sandbox", "version"), "line=sandbox schema_version=0 dirty=false")
			assert.Contains(t, run(true, "--line", "sandbox", "up"), "line=sandbox schema_version=1")
			assert.Contains(t, run(true, "--line", "sandbox", "down"), "line=sandbox schema_version=0")
			assert.Contains(t, run(false, "--line", "sandbox", "down"), "only 0 migration(s) applied")
			assert.Contains(t, run(true, "--line", "sandbox"), "line=sandbox schema_version=1", "no verb means up")
			assert.Contains(t, run(true, "version"), "line=broker schema_version=100 dirty=false")
			assert.Contains(t, run(false, "--line", "nope", "version"), `flag: must be broker or sandbox`)
		})
	}
}
