package durable

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
)

// Rows are a stand-in's durable state: one JSON value per object or counter, by kind and key.
// In a write, a nil value deletes the row.
type Rows = map[string]map[string][]byte

// Store keeps the stand-ins' state durably, one row per object or counter, so that a stand-in
// built on it after a crash answers as before. It must be safe for concurrent use.
type Store interface {
	// Load returns every row of the system.
	Load(ctx context.Context, system string) (Rows, error)
	// Get returns the row of kind with key, nil when there is none.
	Get(ctx context.Context, system, kind, key string) ([]byte, error)
	// Kind returns every row of kind by key.
	Kind(ctx context.Context, system, kind string) (map[string][]byte, error)
	// Prefix returns the rows of kind whose key starts with prefix, by key.
	Prefix(ctx context.Context, system, kind, prefix string) (map[string][]byte, error)
	// Write applies the rows to the system's state in one transaction: a nil value deletes.
	Write(ctx context.Context, system string, rows Rows) error
	// Clear deletes every row of the system.
	Clear(ctx context.Context, system string) error
}

// MemoryStore is a Store in memory, for pure unit tests and stand-ins that need not survive
// their process.
type MemoryStore struct {
	mu      sync.Mutex
	systems map[string]Rows
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{systems: map[string]Rows{}} }

// Load implements Store.
func (m *MemoryStore) Load(_ context.Context, system string) (Rows, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Rows{}
	for kind, keys := range m.systems[system] {
		out[kind] = make(map[string][]byte, len(keys))
		for k, v := range keys {
			out[kind][k] = append([]byte(nil), v...)
		}
	}
	return out, nil
}

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, system, kind, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.systems[system][kind][key]; ok {
		return append([]byte(nil), v...), nil
	}
	return nil, nil
}

// Kind implements Store.
func (m *MemoryStore) Kind(_ context.Context, system, kind string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]byte, len(m.systems[system][kind]))
	for k, v := range m.systems[system][kind] {
		out[k] = append([]byte(nil), v...)
	}
	return out, nil
}

// Prefix implements Store.
func (m *MemoryStore) Prefix(_ context.Context, system, kind, prefix string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range m.systems[system][kind] {
		if strings.HasPrefix(k, prefix) {
			out[k] = append([]byte(nil), v...)
		}
	}
	return out, nil
}

// Write implements Store.
func (m *MemoryStore) Write(_ context.Context, system string, rows Rows) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sys := m.systems[system]
	if sys == nil {
		sys = Rows{}
		m.systems[system] = sys
	}
	for kind, keys := range rows {
		for k, v := range keys {
			if v == nil {
				delete(sys[kind], k)
				continue
			}
			if sys[kind] == nil {
				sys[kind] = map[string][]byte{}
			}
			sys[kind][k] = append([]byte(nil), v...)
		}
	}
	return nil
}

// Clear implements Store.
func (m *MemoryStore) Clear(_ context.Context, system string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.systems, system)
	return nil
}

// InMemory returns the stand-in open returned on a new MemoryStore, for the New functions of the
// stand-ins: loading an empty MemoryStore cannot fail, so an error is a programming error.
func InMemory[S sandbox.System](s S, err error) S {
	if err != nil {
		panic(fmt.Sprintf("opening a stand-in on an empty memory store: %v", err))
	}
	return s
}

// Claimer is a Store that one sandbox at a time may serve from. A stand-in takes its system's
// rows as its own: its Tables keep what they read (absent objects included) and its filter of
// known keys learns only its own writes, so a second sandbox on the same rows would answer from a
// state the first has changed meanwhile, two diverging services where the real one is one. A
// store shared across processes (PostgreSQL) implements it; MemoryStore, used by one process
// that opens and reopens stand-ins on it, does not.
type Claimer interface {
	// TryClaim takes the store for the caller unless another sandbox holds it (false); release
	// gives it back. A holder that dies gives it back with its connection.
	TryClaim(ctx context.Context) (release func(), ok bool, err error)
}
