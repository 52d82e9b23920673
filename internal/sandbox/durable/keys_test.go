package durable

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
	// writeHold, when set, keeps Write from writing until it is closed (a write under way).
	writeHold chan struct{}
	writing   chan struct{} // closed once a held write started
}

func (s *listingStore) Write(ctx context.Context, system string, rows Rows) error {
	s.mu.Lock()
	hold, writing := s.writeHold, s.writing
	s.writeHold = nil
	s.mu.Unlock()
	if hold != nil {
		close(writing)
		<-hold
	}
	return s.MemoryStore.Write(ctx, system, rows)
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

func (s *shelf) knownCapacity() uint {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d.known.learning {
		return 0
	}
	return s.d.known.capacity
}

// A filter that outgrows its capacity is listed again, larger; a row whose write is under way
// while the new listing takes its snapshot is in the new filter all the same.
func TestKnownKeysRelearntWhenOutgrown(t *testing.T) {
	store := newListingStore()
	s := &shelf{}
	s.d = NewDurable(Persist{Store: store, System: "shelf", Lock: &s.mu})
	s.d.known.min = 8
	s.items = NewTable[item](s.d, "item", false)
	s.items.Lookup("color", func(it *item) []string { return []string{it.Color} })
	require.NoError(t, s.d.Load(context.Background()))
	s.waitKeysKnown(t)
	require.Equal(t, uint(8), s.knownCapacity())

	// A write held under way: its row is pinned, not in the store.
	store.mu.Lock()
	release := make(chan struct{})
	store.writeHold, store.writing = release, make(chan struct{})
	writing := store.writing
	store.mu.Unlock()
	done := make(chan error, 2)
	go func() {
		done <- s.d.Do(context.Background(), func() error { s.items.Create("inflight", &item{Color: "teal"}); return nil })
	}()
	<-writing
	// Meanwhile more keys than the filter holds: it is listed again while "inflight" is written.
	go func() {
		done <- s.d.Do(context.Background(), func() error {
			for i := range 10 {
				s.items.Create(fmt.Sprint("more-", i), &item{Color: "blue"})
			}
			return nil
		})
	}()
	require.Eventually(t, func() bool { return s.knownCapacity() > 8 }, 10*time.Second, time.Millisecond, "listed again, larger")
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-done)

	capacity := s.knownCapacity()
	// "inflight" leaves the cache through reads of absent keys: nothing is written, so the
	// filter is not listed again, from a store that has it by now.
	s.do(t, func() {
		for i := range 2 * tableCache {
			s.items.Get(fmt.Sprint("absent-", i))
		}
	})
	require.Equal(t, capacity, s.knownCapacity(), "not listed again")
	s.do(t, func() {
		it, ok := s.items.Get("inflight")
		require.True(t, ok, "a row written while the filter was listed again is found")
		assert.Equal(t, "teal", it.Color)
		for i := range 10 {
			_, ok = s.items.Get(fmt.Sprint("more-", i))
			assert.True(t, ok, "more-%d: written after the listing began, the key that began it among them", i)
		}
		_, ok = s.items.Get("never")
		assert.False(t, ok)
	})
	assert.Zero(t, store.reads("item", "never"))
}
