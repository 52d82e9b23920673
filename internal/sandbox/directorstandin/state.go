package directorstandin

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox/durable"
)

// The kinds of rows the stand-in keeps in its store: one row per runtime (key tenant/id, its
// system auths and calls included) and one per counter.
const (
	kindRuntime         = "runtime"
	kindApplication     = "application"
	kindSeq             = "seq"
	kindRegistrations   = "registrations"
	kindUnregistrations = "unregistrations"
	kindTotals          = "calls"

	seqRuntimes     = "runtimes"
	seqApplications = "applications"
)

// storedRuntime is a runtime as its row holds it.
type storedRuntime struct {
	Seq         int64          `json:"seq"`
	Tenant      string         `json:"tenant"`
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description *string        `json:"description,omitempty"`
	Labels      map[string]any `json:"labels"`
	Status      Status         `json:"status"`
	Tokens      int            `json:"tokens"`
	Auths       []SystemAuth   `json:"auths"`
	// TokenHashes are the SHA-256 of the one-time tokens by system auth ID: the tokens themselves
	// are not kept.
	TokenHashes map[string]string `json:"tokenHashes,omitempty"`
	Calls       map[string]int    `json:"calls"`
}

func runtimeKey(tenant, id string) string { return tenant + "/" + id }

// Lookups of the runtimes table.
const (
	lookupAuth      = "auth"      // system auth IDs
	lookupToken     = "token"     // SHA-256 of one-time tokens
	lookupRuntimeID = "runtimeID" // the RuntimeIDLabel's values
)

func (rec *record) MarshalJSON() ([]byte, error) {
	return json.Marshal(storedRuntime{Seq: rec.seq, Tenant: rec.tenant, ID: rec.id, Name: rec.name, Description: rec.description,
		Labels: rec.labels, Status: rec.status, Tokens: rec.tokens, Auths: rec.auths, TokenHashes: rec.tokenHashes, Calls: rec.calls})
}

// UnmarshalJSON decodes a runtime's row: labels were normalised with numbers as json.Number,
// so they are decoded the same way.
func (rec *record) UnmarshalJSON(b []byte) error {
	var st storedRuntime
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&st); err != nil {
		return err
	}
	if st.Labels == nil {
		st.Labels = map[string]any{}
	}
	if st.Calls == nil {
		st.Calls = map[string]int{}
	}
	if st.TokenHashes == nil {
		st.TokenHashes = map[string]string{}
	}
	*rec = record{seq: st.Seq, tenant: st.Tenant, id: st.ID, name: st.Name, description: st.Description,
		labels: st.Labels, status: st.Status, tokens: st.Tokens, auths: st.Auths, tokenHashes: st.TokenHashes, calls: st.Calls}
	return nil
}

// openRuntimes registers the runtimes' table and its lookups.
func (s *StandIn) openRuntimes() {
	s.rts = durable.NewTable[record](s.durable, kindRuntime, true)
	// System auth IDs are fresh UUIDs and token hashes those of random tokens: unique lookups,
	// written without reading a row that cannot exist.
	s.rts.UniqueLookup(lookupAuth, func(rec *record) []string {
		ids := make([]string, 0, len(rec.auths))
		for _, a := range rec.auths {
			ids = append(ids, a.ID)
		}
		return ids
	})
	s.rts.UniqueLookup(lookupToken, func(rec *record) []string {
		hashes := make([]string, 0, len(rec.tokenHashes))
		for _, h := range rec.tokenHashes {
			hashes = append(hashes, h)
		}
		sort.Strings(hashes)
		return hashes
	})
	s.rts.Lookup(lookupRuntimeID, func(rec *record) []string { return labelValues(rec.labels[RuntimeIDLabel]) })
}

// labelValues are the strings a label filter's query matches in a label's value.
func labelValues(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// get returns the runtime id of tenant; change it only to put it back (touch).
func (s *StandIn) get(tenant, id string) (*record, bool) { return s.rts.Get(runtimeKey(tenant, id)) }

// byLookup returns the one runtime found by lookup name with value.
func (s *StandIn) byLookup(name, value string) (*record, bool) {
	for _, rec := range s.rts.Find(name, value) {
		return rec, true
	}
	return nil, false
}

// touch stores the runtime (new or changed), to be written before the answer.
func (s *StandIn) touch(rec *record) { s.rts.Put(runtimeKey(rec.tenant, rec.id), rec) }

func (s *StandIn) encode(kind, key string) (any, bool) {
	if kind == kindApplication {
		return s.encodeApplication(key)
	}
	return nil, false
}

func (s *StandIn) restore(rows durable.Rows) error { return s.restoreApplications(rows) }
