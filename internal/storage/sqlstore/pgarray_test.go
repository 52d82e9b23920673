package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// binarySessions opens a fresh database with binary parameters, as the PostgreSQL driver does.
func binarySessions(t *testing.T) *sql.DB {
	cfg, err := pq.NewConfig(pgtest.NewDatabase(t))
	require.NoError(t, err)
	cfg.BinaryParameters = true
	c, err := pq.NewConnectorConfig(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	return db
}

// elements reads back the array parameter arg cast to typ, element by element (nil: NULL).
func elements(t *testing.T, db *sql.DB, typ string, arg any) []*string {
	rows, err := db.QueryContext(context.Background(),
		"SELECT x::text FROM unnest($1::"+typ+") WITH ORDINALITY AS a(x, n) ORDER BY n", arg)
	require.NoError(t, err)
	defer rows.Close()
	out := []*string{}
	for rows.Next() {
		var v sql.NullString
		require.NoError(t, rows.Scan(&v))
		if v.Valid {
			out = append(out, &v.String)
		} else {
			out = append(out, nil)
		}
	}
	require.NoError(t, rows.Err())
	return out
}

func ptrs(vs ...string) []*string {
	out := make([]*string, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

// The arrays arrive in PostgreSQL element for element: quotes, backslashes, braces, commas,
// the word NULL, newlines and non-ASCII text as they are; NULLs as NULL; none at all as empty.
func TestPGArraysRoundTrip(t *testing.T) {
	db := binarySessions(t)
	values := []string{"", "plain", `{"steps":{"a":{"done":true}}}`, `back\slash "quoted"`, "comma, {brace}", "NULL", "ünïcode\n",
		strings.Repeat(`{"k":"v"},`, 1000)}
	for _, in := range [][]string{nil, {}, values, values[:1]} {
		asBytes := make(pgByteTextArray, len(in))
		for i, v := range in {
			asBytes[i] = []byte(v)
		}
		assert.Equal(t, ptrs(in...), elements(t, db, "text[]", pgTextArray(in)))
		assert.Equal(t, ptrs(in...), elements(t, db, "text[]", asBytes))
	}

	nulls := pgNullTextArray{{String: "a", Valid: true}, {}, {String: `x"y`, Valid: true}, {String: "", Valid: true}}
	assert.Equal(t, []*string{ptrs("a")[0], nil, ptrs(`x"y`)[0], ptrs("")[0]}, elements(t, db, "text[]", nulls))

	bytea := pgByteaArray{{0, 1, 2, '"', '\\', 255}, nil, {}}
	var got [][]byte
	rows, err := db.Query("SELECT x FROM unnest($1::bytea[]) WITH ORDINALITY AS a(x, n) ORDER BY n", bytea)
	require.NoError(t, err)
	for rows.Next() {
		var b []byte
		require.NoError(t, rows.Scan(&b))
		got = append(got, b)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, [][]byte{{0, 1, 2, '"', '\\', 255}, nil, {}}, got)

	// Times go as text literals, parsed as PostgreSQL parses one time (nanoseconds rounded).
	times := pgTimeArray{{String: "2026-11-24T04:00:00.123456789Z", Valid: true}, {}}
	var ts []sql.NullTime
	rows, err = db.Query("SELECT x FROM unnest($1::timestamptz[]) WITH ORDINALITY AS a(x, n) ORDER BY n", times)
	require.NoError(t, err)
	for rows.Next() {
		var v sql.NullTime
		require.NoError(t, rows.Scan(&v))
		ts = append(ts, v)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ts, 2)
	assert.True(t, ts[0].Time.Equal(time.Date(2026, 11, 24, 4, 0, 0, 123457000, time.UTC)), ts[0].Time)
	assert.False(t, ts[1].Valid)

	// A text element PostgreSQL cannot hold is refused, as it was in a literal.
	_, err = db.Exec("SELECT $1::text[]", pgTextArray{"nul\x00byte"})
	require.Error(t, err)
}

// The times' literal is exactly lib/pq's.
func TestPGTimeArrayMatchesLibPQ(t *testing.T) {
	nulls := []sql.NullString{{String: "2026-11-24T04:00:00Z", Valid: true}, {}, {String: `x"y`, Valid: true}, {String: "", Valid: true}}
	want, err := pq.GenericArray{A: nulls}.Value()
	require.NoError(t, err)
	got, err := pgTimeArray(nulls).Value()
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
