package sqlstore

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

func TestDBTimeScan(t *testing.T) {
	want := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	for name, v := range map[string]any{
		"micros":      want.UnixMicro(),
		"time":        want.In(time.FixedZone("X", 3600)).Add(789 * time.Nanosecond),
		"text micros": []byte("1893553445123456"),
		"rfc3339":     "2030-01-02T04:04:05.123456+01:00",
	} {
		var ts dbTime
		require.NoError(t, ts.Scan(v), name)
		assert.True(t, ts.Valid, name)
		assert.Equal(t, want, ts.Time, name)
		assert.Equal(t, time.UTC, ts.Time.Location(), name)
	}
	var ts dbTime
	require.NoError(t, ts.Scan(nil))
	assert.False(t, ts.Valid)
	assert.Nil(t, ts.ptr())
	assert.True(t, ts.value().IsZero())
	assert.Error(t, ts.Scan(true))
	assert.Error(t, ts.Scan("yesterday"))
}

func TestTimeArg(t *testing.T) {
	tm := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 7200))
	assert.Equal(t, tm.UnixMicro(), Dialect{TimeAsMicros: true}.timeArg(tm))
	got := Dialect{}.timeArg(tm).(time.Time)
	assert.Equal(t, time.UTC, got.Location())
	assert.Equal(t, tm.Truncate(time.Microsecond).UTC(), got)
	assert.Nil(t, Dialect{}.nullTimeArg(nil))
	assert.Nil(t, Dialect{}.zeroNullTimeArg(time.Time{}))
}

func TestPageBounds(t *testing.T) {
	for _, tc := range []struct {
		p             storage.Paging
		limit, offset uint64
		err           string
	}{
		{storage.Paging{}, 100, 0, ""},
		{storage.Paging{Page: 1, PageSize: 10}, 10, 0, ""},
		{storage.Paging{Page: 3, PageSize: 10}, 10, 20, ""},
		{storage.Paging{PageSize: 1000}, 1000, 0, ""},
		{storage.Paging{PageSize: 1001}, 0, 0, "PageSize"},
		{storage.Paging{PageSize: -1}, 0, 0, "PageSize"},
		{storage.Paging{Page: -1}, 0, 0, "Page"},
	} {
		limit, offset, err := pageBounds(tc.p)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.limit, limit)
		assert.Equal(t, tc.offset, offset)
	}
}

func TestLoadMigrations(t *testing.T) {
	ms, err := LoadMigrations(fstest.MapFS{
		"0002_more.up.sql": {Data: []byte("B")},
		"0001_init.up.sql": {Data: []byte("A")},
		"README.md":        {Data: []byte("x")},
		"0003_x.down.sql":  {Data: []byte("ignored")},
	})
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, Migration{Version: 1, Name: "init", SQL: "A"}, ms[0])
	assert.Equal(t, 2, ms[1].Version)
	_, err = LoadMigrations(fstest.MapFS{"0001_a.up.sql": {}, "1_b.up.sql": {}})
	assert.ErrorContains(t, err, "same version")
}
