package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listingStore is a MemoryStore that lists keys and counts its point reads; hold, when set,
// keeps Keys from answering until it is closed (a scan still under way, its snapshot taken),
// and keysErr fails it.
type listingStore struct {
	*MemoryStore
	mu      sync.Mutex
	gets    map[string]int
	hold    chan struct{}
	snapped chan struct{} // closed once a held listing took its snapshot
	keysErr error
}

func newListingStore() *listingStore {
	return &listingStore{MemoryStore: NewMemoryStore(), gets: map[string]int{}}
}

func (s *listingStore) Get(ctx context.Context, system, kind, key string) ([]byte, error) {
	s.mu.Lock()
	s.gets[kind+" "+key]++
	s.mu.Unlock()
	return s.MemoryStore.Get(ctx, system, kind, key)
}

func (s *listingStore) reads(kind, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[kind+" "+key]
}

func (s *listingStore) Keys(ctx context.Context, system string, fn func(kind, key string)) error {
	if s.keysErr != nil {
		return s.keysErr
	}
	// The listing is of the rows when it starts, as a database's snapshot is.
	rows, err := s.MemoryStore.Load(ctx, system)
	if err != nil {
		return err
	}
	if s.hold != nil {
		close(s.snapped)
		<-s.hold
	}
	for kind, keys := range rows {
		for key := range keys {
			fn(kind, key)
		}
	}
	return nil
}

func (s *shelf) keysKnown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d.known.filter != nil
}

func (s *shelf) waitKeysKnown(t *testing.T) {
	t.Helper()
	require.Eventually(t, s.keysKnown, 10*time.Second, time.Millisecond)
}

// Once the keys are known, a key that never existed is not read; keys that exist (written before
// the stand-in started, or by it since) are read and found, by key and through lookups.
func TestKnownKeysSkipReadsOfAbsentKeys(t *testing.T) {
	store := newListingStore()
	before := openShelf(t, store)
	before.do(t, func() { before.items.Put("old", &item{Color: "red"}) })

	readsBefore := store.reads("item", "old")
	s := openShelf(t, store)
	s.waitKeysKnown(t)
	s.do(t, func() {
		_, ok := s.items.Get("never")
		assert.False(t, ok)
	})
	assert.Zero(t, store.reads("item", "never"), "a key that never existed is not read")
	assert.Equal(t, []string{"old"}, s.find(t, "red"), "a key written before the start is found")
	assert.Equal(t, readsBefore+1, store.reads("item", "old"))
	assert.Empty(t, s.find(t, "green"))
	assert.Zero(t, store.reads("item/color", "green"), "a lookup value never used is not read")

	// Written by this stand-in, then forgotten by its cache: read and found.
	s.do(t, func() { s.items.Put("new", &item{Color: "green", N: 1}) })
	for i := range 2 * tableCache {
		s.do(t, func() { s.items.Create(fmt.Sprint("filler-", i), &item{Color: "blue"}) })
	}
	s.do(t, func() {
		it, ok := s.items.Get("new")
		require.True(t, ok)
		assert.Equal(t, 1, it.N)
	})
	assert.Equal(t, 1, store.reads("item", "new"), "read from the store once no longer cached")
	assert.Equal(t, []string{"new"}, s.find(t, "green"))
}

// Keys written while the store's keys are being listed (after the listing's snapshot) are known
// once the list is in.
func TestKnownKeysLearntDuringTheScan(t *testing.T) {
	store := newListingStore()
	store.hold, store.snapped = make(chan struct{}), make(chan struct{})
	s := openShelf(t, store)
	<-store.snapped
	s.do(t, func() { s.items.Put("during", &item{Color: "red"}) })
	for i := range 2 * tableCache {
		s.do(t, func() { s.items.Create(fmt.Sprint("filler-", i), &item{Color: "blue"}) })
	}
	assert.False(t, s.keysKnown(), "not known while the scan is under way")
	close(store.hold)
	s.waitKeysKnown(t)
	s.do(t, func() {
		_, ok := s.items.Get("during")
		assert.True(t, ok, "a key written during the scan is read and found")
	})
	assert.Equal(t, []string{"during"}, s.find(t, "red"))
}

// A store whose listing fails (or that cannot list) is read for every key, as before.
func TestKnownKeysWithoutAListing(t *testing.T) {
	store := newListingStore()
	store.keysErr = errors.New("listing refused")
	s := openShelf(t, store)
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.d.known.learning
	}, 10*time.Second, time.Millisecond)
	assert.False(t, s.keysKnown())
	s.do(t, func() { s.items.Get("never") })
	assert.Equal(t, 1, store.reads("item", "never"))
}
