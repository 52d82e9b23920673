package durable_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// notes is a minimal stand-in state: notes by name and a counter of writes per name.
type notes struct {
	mu      sync.Mutex
	d       *durable.Durable
	notes   map[string]string
	writes  *durable.Counts
	handler http.Handler
}

func openNotes(t *testing.T, store durable.Store) *notes {
	t.Helper()
	n := &notes{}
	n.d = durable.NewDurable(durable.Persist{Store: store, System: "notes", Lock: &n.mu,
		Encode: func(kind, key string) (any, bool) {
			v, ok := n.notes[key]
			return v, ok && kind == "note"
		},
		Restore: func(rows durable.Rows) error {
			n.notes = map[string]string{}
			return durable.Each(rows, "note", func(key, v string) { n.notes[key] = v })
		}})
	n.writes = n.d.Counts("writes")
	require.NoError(t, n.d.Load(context.Background()))
	n.handler = n.d.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		name := strings.TrimPrefix(r.URL.Path, "/")
		switch r.Method {
		case http.MethodPut:
			n.notes[name] = r.URL.Query().Get("text")
			n.writes.Inc(name)
		case http.MethodDelete:
			delete(n.notes, name)
		}
		n.d.Touch("note", name)
		w.Header().Set("X-Note", n.notes[name])
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(n.notes[name]))
	}))
	return n
}

func (n *notes) do(method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	n.handler.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// failingStore fails its writes while fail is set.
type failingStore struct {
	durable.Store
	fail bool
}

func (f *failingStore) Write(ctx context.Context, system string, rows durable.Rows) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.Store.Write(ctx, system, rows)
}

func TestDurableWritesBeforeAnswering(t *testing.T) {
	store := durable.NewMemoryStore()
	n := openNotes(t, store)
	rec := n.do(http.MethodPut, "/a?text=hello")
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Equal(t, "hello", rec.Header().Get("X-Note"))
	assert.Equal(t, "hello", rec.Body.String())
	n.do(http.MethodPut, "/a?text=again")
	n.do(http.MethodPut, "/b?text=gone")
	n.do(http.MethodDelete, "/b")

	rows, err := store.Load(context.Background(), "notes")
	require.NoError(t, err)
	assert.Equal(t, durable.Rows{"note": {"a": []byte(`"again"`)}, "writes": {"a": []byte("2"), "b": []byte("1")}}, rows,
		"one row per object and per counter; a deleted object has none")

	again := openNotes(t, store)
	assert.Equal(t, map[string]string{"a": "again"}, again.notes)
	assert.Equal(t, map[string]int{"a": 2, "b": 1}, again.writes.Map())

	require.NoError(t, again.d.Reset(context.Background()))
	assert.Empty(t, again.notes)
	assert.Empty(t, again.writes.Map())
	rows, err = store.Load(context.Background(), "notes")
	require.NoError(t, err)
	assert.Empty(t, rows)
}

func TestDurableFailedWriteAnswers503AndForgets(t *testing.T) {
	store := &failingStore{Store: durable.NewMemoryStore()}
	n := openNotes(t, store)
	n.do(http.MethodPut, "/a?text=kept")
	store.fail = true
	rec := n.do(http.MethodPut, "/a?text=lost")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "saving the notes stand-in's state: disk full")
	assert.Empty(t, rec.Header().Get("X-Note"), "nothing of the held-back answer goes out")
	assert.Equal(t, map[string]string{"a": "kept"}, n.notes, "memory is back to what the store holds")
	assert.Equal(t, map[string]int{"a": 1}, n.writes.Map())
	store.fail = false
	assert.Equal(t, "kept", n.do(http.MethodGet, "/a").Body.String())
}

// A holder that keeps the whole answer itself (the in-process transport's BufferedResponse) is
// written to directly; a failed write leaves only the 503 in it.
func TestDurableWritesIntoAHeldAnswer(t *testing.T) {
	store := &failingStore{Store: durable.NewMemoryStore()}
	n := openNotes(t, store)
	w := durable.NewBufferedResponse()
	n.handler.ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/a?text=kept", nil))
	res := w.Response(httptest.NewRequest(http.MethodPut, "/a", nil))
	assert.Equal(t, http.StatusCreated, res.StatusCode)
	assert.Equal(t, "kept", res.Header.Get("X-Note"))

	store.fail = true
	w = durable.NewBufferedResponse()
	n.handler.ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/a?text=lost", nil))
	res = w.Response(httptest.NewRequest(http.MethodPut, "/a", nil))
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Empty(t, res.Header.Get("X-Note"), "nothing of the held-back answer stays")
	body := new(strings.Builder)
	_, _ = io.Copy(body, res.Body)
	assert.Contains(t, body.String(), "saving the notes stand-in's state: disk full")
	assert.NotContains(t, body.String(), "lost")
}

// gatedStore holds its first write until release is closed and counts writes.
type gatedStore struct {
	durable.Store
	mu      sync.Mutex
	writes  int
	writing chan struct{}
	release chan struct{}
}

func (g *gatedStore) Write(ctx context.Context, system string, rows durable.Rows) error {
	g.mu.Lock()
	g.writes++
	first := g.writes == 1
	g.mu.Unlock()
	if first {
		close(g.writing)
		<-g.release
	}
	return g.Store.Write(ctx, system, rows)
}

// Requests served while a write is under way are written together in the next transaction, and
// still none answers before its own change is stored.
func TestDurableGroupCommits(t *testing.T) {
	store := &gatedStore{Store: durable.NewMemoryStore(), writing: make(chan struct{}), release: make(chan struct{})}
	n := openNotes(t, store)
	var served sync.WaitGroup
	const queued = 20
	answers := make(chan string, queued+1)
	put := func(name string) {
		rec := n.do(http.MethodPut, "/"+name+"?text=v-"+name)
		rows, err := store.Store.Load(context.Background(), "notes")
		if rec.Code != http.StatusCreated || err != nil || string(rows["note"][name]) != `"v-`+name+`"` {
			answers <- "answered before stored: " + name
			return
		}
		answers <- ""
	}
	go put("first")
	<-store.writing
	served.Add(queued)
	for i := 0; i < queued; i++ {
		go func() {
			defer served.Done()
			put(string(rune('a' + i)))
		}()
	}
	// Every queued request is served in memory while the first write is held.
	deadline := time.Now().Add(time.Minute)
	for {
		require.True(t, time.Now().Before(deadline), "requests were not served while a write was under way")
		n.mu.Lock()
		got := len(n.notes)
		n.mu.Unlock()
		if got == queued+1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(store.release)
	served.Wait()
	for i := 0; i < queued+1; i++ {
		assert.Empty(t, <-answers)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	assert.LessOrEqual(t, store.writes, 3, "the %d requests served during the first write are written in one or two transactions", queued)
}

// A Tally keeps its counters in one row; counters a stand-in kept as Counts (a row each) are
// its counters until the first change folds them into that row.
func TestTallyKeepsOneRow(t *testing.T) {
	ctx := context.Background()
	store := durable.NewMemoryStore()
	require.NoError(t, store.Write(ctx, "tally", durable.Rows{"calls": {"get": []byte("2"), "put": []byte("1")}}))
	var mu sync.Mutex
	open := func() (*durable.Durable, *durable.Counts) {
		d := durable.NewDurable(durable.Persist{Store: store, System: "tally", Lock: &mu})
		c := d.Tally("calls")
		require.NoError(t, d.Load(ctx))
		return d, c
	}
	d, calls := open()
	require.NoError(t, d.Do(ctx, func() error {
		assert.Equal(t, map[string]int{"get": 2, "put": 1}, calls.Map(), "the former rows, before any change")
		assert.Equal(t, 2, calls.Get("get"))
		return nil
	}))
	require.NoError(t, d.Do(ctx, func() error {
		calls.Inc("get")
		calls.Inc("list")
		return nil
	}))
	rows, err := store.Load(ctx, "tally")
	require.NoError(t, err)
	assert.JSONEq(t, `{"get":3,"put":1,"list":1}`, string(rows["calls"][""]))
	assert.Len(t, rows["calls"], 1, "one row")
	d, calls = open() // as after a restart
	require.NoError(t, d.Do(ctx, func() error {
		assert.Equal(t, map[string]int{"get": 3, "put": 1, "list": 1}, calls.Map())
		return nil
	}))
}
