package director

import (
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/sandbox"
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

// touch marks the runtime as changed, to be written before the answer.
func (s *StandIn) touch(rec *record) { s.durable.Touch(kindRuntime, runtimeKey(rec.tenant, rec.id)) }

func (s *StandIn) encode(kind, key string) (any, bool) {
	if kind == kindApplication {
		return s.encodeApplication(key)
	}
	// Runtime IDs are UUIDs; a tenant may contain a slash.
	i := strings.LastIndex(key, "/")
	if kind != kindRuntime || i < 0 {
		return nil, false
	}
	rec, ok := s.tenants[key[:i]][key[i+1:]]
	if !ok {
		return nil, false
	}
	return storedRuntime{Seq: rec.seq, Tenant: rec.tenant, ID: rec.id, Name: rec.name, Description: rec.description,
		Labels: rec.labels, Status: rec.status, Tokens: rec.tokens, Auths: rec.auths, TokenHashes: rec.tokenHashes, Calls: rec.calls}, true
}

func (s *StandIn) restore(rows sandbox.Rows) error {
	s.tenants = map[string]map[string]*record{}
	s.authOwners = map[string]*record{}
	s.tokenAuths = map[string]string{}
	// Labels were normalised with numbers as json.Number: they are decoded the same way.
	if err := sandbox.EachExact(rows, kindRuntime, func(_ string, st storedRuntime) {
		labels := st.Labels
		if labels == nil {
			labels = map[string]any{}
		}
		if st.Calls == nil {
			st.Calls = map[string]int{}
		}
		if st.TokenHashes == nil {
			st.TokenHashes = map[string]string{}
		}
		rec := &record{seq: st.Seq, tenant: st.Tenant, id: st.ID, name: st.Name, description: st.Description,
			labels: labels, status: st.Status, tokens: st.Tokens, auths: st.Auths, tokenHashes: st.TokenHashes, calls: st.Calls}
		if s.tenants[rec.tenant] == nil {
			s.tenants[rec.tenant] = map[string]*record{}
		}
		s.tenants[rec.tenant][rec.id] = rec
		for _, a := range rec.auths {
			s.authOwners[a.ID] = rec
			if h, ok := rec.tokenHashes[a.ID]; ok {
				s.tokenAuths[h] = a.ID
			}
		}
	}); err != nil {
		return err
	}
	return s.restoreApplications(rows)
}
