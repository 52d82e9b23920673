package pgtest_test

import (
	"database/sql"
	"testing"

	_ "github.com/lib/pq"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestNewDatabaseIsolated(t *testing.T) {
	url1 := pgtest.NewDatabase(t)
	url2 := pgtest.NewDatabase(t)
	if url1 == url2 {
		t.Fatalf("NewDatabase returned the same URL twice: %s", url1)
	}

	db1 := open(t, url1)
	db2 := open(t, url2)

	var name1, name2 string
	if err := db1.QueryRow("SELECT current_database()").Scan(&name1); err != nil {
		t.Fatal(err)
	}
	if err := db2.QueryRow("SELECT current_database()").Scan(&name2); err != nil {
		t.Fatal(err)
	}
	if name1 == name2 || name1 == "postgres" || name2 == "postgres" {
		t.Fatalf("databases not distinct: %q, %q", name1, name2)
	}

	// A table written in one database must not be visible in the other.
	if _, err := db1.Exec("CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := db1.QueryRow("SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("read back: v=%d err=%v", v, err)
	}
	var n int
	if err := db2.QueryRow("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("second database is not empty: %d tables", n)
	}
}

func TestServerURL(t *testing.T) {
	db := open(t, pgtest.ServerURL(t))
	var fsync string
	if err := db.QueryRow("SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	// Benchmarks rely on durable commits; a server with fsync off would lie.
	if fsync != "on" {
		t.Errorf("fsync = %q, want on", fsync)
	}
}

func open(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	// Closed before NewDatabase's cleanup drops the database (LIFO order).
	t.Cleanup(func() { db.Close() })
	return db
}

// A private server can be stopped (connections fail) and started again with its data.
func TestPrivateServerStopsAndStartsWithItsData(t *testing.T) {
	srv := pgtest.StartPrivate(t)
	db := open(t, srv.URL)
	if _, err := db.Exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := db.Ping(); err == nil {
		t.Fatal("ping succeeded while the server was stopped")
	}
	srv.Start()
	var v int
	if err := db.QueryRow("SELECT v FROM kept").Scan(&v); err != nil || v != 7 {
		t.Fatalf("after the restart: v=%d err=%v", v, err)
	}
}
