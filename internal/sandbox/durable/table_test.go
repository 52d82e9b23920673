package durable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type item struct {
	Color string `json:"color"`
	N     int    `json:"n"`
}

// shelf is a stand-in state kept only in a Table, with a lookup by color.
type shelf struct {
	mu    sync.Mutex
	d     *Durable
	items *Table[item]
}

func openShelf(t *testing.T, store Store) *shelf {
	t.Helper()
	s := &shelf{}
	s.d = NewDurable(Persist{Store: store, System: "shelf", Lock: &s.mu})
	s.items = NewTable[item](s.d, "item", false)
	s.items.Lookup("color", func(it *item) []string { return []string{it.Color} })
	require.NoError(t, s.d.Load(context.Background()))
	return s
}

func (s *shelf) do(t *testing.T, fn func()) {
	t.Helper()
	require.NoError(t, s.d.Do(context.Background(), func() error { fn(); return nil }))
}

func (s *shelf) find(t *testing.T, color string) []string {
	t.Helper()
	var keys []string
	s.do(t, func() {
		for k := range s.items.Find("color", color) {
			keys = append(keys, k)
		}
	})
	return keys
}

// Objects are in the store, not in memory: beyond the cache's size they are read back on demand,
// and lookups find them.
func TestTableKeepsABoundedCache(t *testing.T) {
	store := NewMemoryStore()
	s := openShelf(t, store)
	const n = 3 * tableCache
	for i := range n {
		s.do(t, func() { s.items.Put(fmt.Sprint(i), &item{Color: []string{"red", "blue", "green"}[i%3], N: i}) })
	}
	s.mu.Lock()
	cached := len(s.items.entries)
	s.mu.Unlock()
	assert.LessOrEqual(t, cached, tableCache, "unchanged objects beyond the cache are forgotten")
	s.do(t, func() {
		it, ok := s.items.Get("0")
		require.True(t, ok, "an object no longer cached is read from the store")
		assert.Equal(t, item{Color: "red", N: 0}, *it)
	})
	assert.Len(t, s.find(t, "red"), n/3)
	s.do(t, func() { assert.Len(t, s.items.All(), n) })

	// A restart reads nothing up front and finds the same.
	again := openShelf(t, store)
	assert.Empty(t, again.items.entries)
	assert.Len(t, again.find(t, "blue"), n/3)
}

// Lookups follow changes and deletes.
func TestTableLookupsFollowChanges(t *testing.T) {
	store := NewMemoryStore()
	s := openShelf(t, store)
	s.do(t, func() {
		s.items.Put("a", &item{Color: "red"})
		s.items.Put("b", &item{Color: "red"})
	})
	s.do(t, func() {
		it, _ := s.items.Get("a")
		it.Color = "blue"
		s.items.Put("a", it)
		s.items.Delete("b")
	})
	assert.Empty(t, s.find(t, "red"))
	assert.Equal(t, []string{"a"}, s.find(t, "blue"))
	rows, err := store.Load(context.Background(), "shelf")
	require.NoError(t, err)
	assert.Equal(t, Rows{"item": {"a": []byte(`{"color":"blue","n":0}`)}, "item/color": {"blue": []byte(`["a"]`)}}, rows,
		"an emptied lookup value has no row")
}

// heldStore holds its writes while hold is set, until release is closed.
type heldStore struct {
	Store
	hold    bool
	writing chan struct{}
	release chan struct{}
}

func (h *heldStore) Write(ctx context.Context, system string, rows Rows) error {
	if h.hold {
		h.hold = false
		close(h.writing)
		<-h.release
	}
	return h.Store.Write(ctx, system, rows)
}

// While an object's write is under way, requests see its new value (not the store's older one),
// however many other objects pass through the cache meanwhile.
func TestTableServesWhatIsBeingWritten(t *testing.T) {
	store := &heldStore{Store: NewMemoryStore(), writing: make(chan struct{}), release: make(chan struct{})}
	s := openShelf(t, store)
	s.do(t, func() { s.items.Put("x", &item{Color: "red", N: 1}) })
	store.hold = true
	done := make(chan error, 1)
	go func() {
		done <- s.d.Do(context.Background(), func() error {
			it, _ := s.items.Get("x")
			it.N = 2
			s.items.Put("x", it)
			return nil
		})
	}()
	<-store.writing
	s.mu.Lock()
	for i := range 2 * tableCache {
		s.items.Get(fmt.Sprint("other-", i))
	}
	s.items.trim()
	s.mu.Unlock()
	var seen item
	var red []string
	second := make(chan error, 1)
	served := make(chan struct{})
	go func() {
		second <- s.d.Do(context.Background(), func() error {
			it, _ := s.items.Get("x")
			seen = *it
			for k := range s.items.Find("color", "red") {
				red = append(red, k)
			}
			close(served)
			return nil
		})
	}()
	// The second request is served while the first write is held; its own commit waits for it.
	<-served
	close(store.release)
	require.NoError(t, <-done)
	require.NoError(t, <-second)
	assert.Equal(t, item{Color: "red", N: 2}, seen)
	assert.Equal(t, []string{"x"}, red)
}

// failingReads fails its reads while fail is set.
type failingReads struct {
	Store
	fail bool
}

func (f *failingReads) Get(ctx context.Context, system, kind, key string) ([]byte, error) {
	if f.fail {
		return nil, errors.New("connection reset")
	}
	return f.Store.Get(ctx, system, kind, key)
}

// A request whose read fails answers 503 (it ran on a missing object) and writes nothing.
func TestTableFailedReadAnswers503(t *testing.T) {
	store := &failingReads{Store: NewMemoryStore()}
	s := openShelf(t, store)
	s.do(t, func() { s.items.Put("a", &item{Color: "red", N: 1}) })
	s.mu.Lock()
	s.items.reset() // as after a restart: nothing cached
	s.mu.Unlock()
	h := s.d.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.items.Get("a"); !ok {
			s.items.Put("a", &item{Color: "new"})
		}
		w.WriteHeader(http.StatusCreated)
	}))
	store.fail = true
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/a", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "connection reset")
	store.fail = false
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/a", nil))
	assert.Equal(t, http.StatusCreated, rec.Code)
	s.do(t, func() {
		it, _ := s.items.Get("a")
		assert.Equal(t, item{Color: "red", N: 1}, *it, "the failed request changed nothing")
	})
}

// A shared lookup keeps one row per value and object, found by a prefix read, and follows
// changes and deletes as a listed one does.
func TestTableSharedLookup(t *testing.T) {
	store := NewMemoryStore()
	s := &shelf{}
	s.d = NewDurable(Persist{Store: store, System: "shelf", Lock: &s.mu})
	s.items = NewTable[item](s.d, "item", false)
	s.items.SharedLookup("color", func(it *item) []string { return []string{it.Color} })
	require.NoError(t, s.d.Load(context.Background()))
	s.do(t, func() {
		s.items.Put("a", &item{Color: "red"})
		s.items.Put("b", &item{Color: "red"})
		s.items.Put("c", &item{Color: "redder"})
	})
	assert.ElementsMatch(t, []string{"a", "b"}, s.find(t, "red"))
	s.do(t, func() {
		it, _ := s.items.Get("a")
		it.Color = "blue"
		s.items.Put("a", it)
		s.items.Delete("b")
		found := s.items.Find("color", "red")
		assert.Len(t, found, 1, "a deleted object is not found")
		assert.Equal(t, "blue", found["a"].Color, "the request's own changes reach the lookup when it is written: callers check values")
	})
	assert.Empty(t, s.find(t, "red"))
	assert.Equal(t, []string{"a"}, s.find(t, "blue"))
	rows, err := store.Load(context.Background(), "shelf")
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"blue\x1fa": []byte("true"), "redder\x1fc": []byte("true")}, rows["item/color"])
}

// countingReads counts point reads by kind.
type countingReads struct {
	Store
	gets map[string]int
}

func (c *countingReads) Get(ctx context.Context, system, kind, key string) ([]byte, error) {
	c.gets[kind]++
	return c.Store.Get(ctx, system, kind, key)
}

// Rows whose previous value does not matter are written without reading them: an object created
// under a new key, a shared lookup's pairs, and any row of a table without lookups. What is
// written is what a read-first write would have written.
func TestTableWritesWithoutReading(t *testing.T) {
	store := &countingReads{Store: NewMemoryStore(), gets: map[string]int{}}
	s := &shelf{}
	s.d = NewDurable(Persist{Store: store, System: "shelf", Lock: &s.mu})
	s.items = NewTable[item](s.d, "item", false)
	s.items.SharedLookup("color", func(it *item) []string { return []string{it.Color} })
	plain := NewTable[item](s.d, "plain", false)
	require.NoError(t, s.d.Load(context.Background()))
	s.do(t, func() {
		s.items.Create("a", &item{Color: "red", N: 1})
		plain.Put("p", &item{N: 1})
	})
	s.mu.Lock()
	s.items.reset() // as after a restart: nothing cached
	plain.reset()
	s.mu.Unlock()
	s.do(t, func() {
		plain.Put("p", &item{N: 2})
		plain.Delete("q")
	})
	assert.Empty(t, store.gets, "nothing was read")
	assert.Equal(t, []string{"a"}, s.find(t, "red"))
	s.do(t, func() {
		it, _ := s.items.Get("a")
		it.Color = "blue"
		s.items.Put("a", it)
	})
	assert.Equal(t, map[string]int{"item": 1}, store.gets, "a change of an object with lookups reads it once")
	assert.Empty(t, s.find(t, "red"))
	rows, err := store.Load(context.Background(), "shelf")
	require.NoError(t, err)
	assert.Equal(t, Rows{
		"item":       {"a": []byte(`{"color":"blue","n":1}`)},
		"item/color": {"blue\x1fa": []byte("true")},
		"plain":      {"p": []byte(`{"color":"","n":2}`)},
	}, rows)
}

// A unique lookup's rows are written and deleted without reading them, in the form a Lookup
// writes (a list of keys), and lookups find through them.
func TestTableUniqueLookup(t *testing.T) {
	store := &countingReads{Store: NewMemoryStore(), gets: map[string]int{}}
	s := &shelf{}
	s.d = NewDurable(Persist{Store: store, System: "shelf", Lock: &s.mu})
	s.items = NewTable[item](s.d, "item", false)
	s.items.UniqueLookup("color", func(it *item) []string { return []string{it.Color} })
	require.NoError(t, s.d.Load(context.Background()))
	s.do(t, func() {
		s.items.Create("a", &item{Color: "token-1"})
		s.items.Create("b", &item{Color: "token-2"})
	})
	assert.Empty(t, store.gets, "nothing was read")
	s.mu.Lock()
	s.items.reset() // as after a restart: nothing cached
	s.mu.Unlock()
	assert.Equal(t, []string{"a"}, s.find(t, "token-1"))
	s.do(t, func() {
		it, _ := s.items.Get("a")
		it.Color = "token-3"
		s.items.Put("a", it)
		s.items.Delete("b")
	})
	assert.Empty(t, s.find(t, "token-1"))
	assert.Empty(t, s.find(t, "token-2"))
	assert.Equal(t, []string{"a"}, s.find(t, "token-3"))
	assert.Zero(t, store.gets["item/color"], "the changes read no lookup row")
	rows, err := store.Load(context.Background(), "shelf")
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"token-3": []byte(`["a"]`)}, rows["item/color"])
	assert.Panics(t, func() { s.items.Counts("color", "creates", "former") }, "a unique lookup keeps no counts")
}

// Counters by a lookup's value live in the lookup's rows and outlive the objects; rows of the
// Counts they replace still count; a lookup row without counters stays a list of keys.
func TestTableCountsByLookupValue(t *testing.T) {
	ctx := context.Background()
	store := &countingReads{Store: NewMemoryStore(), gets: map[string]int{}}
	require.NoError(t, store.Write(ctx, "shelf", Rows{"createsByColor": {"red": []byte("2")}}))
	s := &shelf{}
	s.d = NewDurable(Persist{Store: store, System: "shelf", Lock: &s.mu})
	s.items = NewTable[item](s.d, "item", false)
	s.items.Lookup("color", func(it *item) []string { return []string{it.Color} })
	creates := s.items.Counts("color", "creates", "createsByColor")
	require.NoError(t, s.d.Load(ctx))
	s.do(t, func() {
		s.items.Create("a", &item{Color: "red"})
		creates.Add("red", 1)
		s.items.Create("b", &item{Color: "blue"})
	})
	assert.Equal(t, map[string]int{"item/color": 2}, store.gets, "the lookup rows only")
	s.do(t, func() {
		s.items.Delete("a")
		assert.Equal(t, 3, creates.Get("red"))
	})
	assert.Empty(t, s.find(t, "red"))
	rows, err := store.Load(ctx, "shelf")
	require.NoError(t, err)
	assert.JSONEq(t, `{"keys":[],"counts":{"creates":1}}`, string(rows["item/color"]["red"]), "the row outlives its objects")
	assert.Equal(t, `["b"]`, string(rows["item/color"]["blue"]))
	s.do(t, func() { assert.Equal(t, map[string]int{"red": 3}, creates.Map()) })
}
