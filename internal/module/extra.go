package module

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// Extra holds the JSON fields a descriptor type does not know, verbatim, so writing a parsed
// descriptor back gives them back.
type Extra map[string]json.RawMessage

// unmarshalKnown decodes data into known (a pointer to a struct without JSON methods) and keeps
// every field known does not declare in extra.
func unmarshalKnown(data []byte, known any, extra *Extra) error {
	// Numbers stay as written (json.Number), so a re-write does not turn 1.0 into 1.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(known); err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	for _, k := range jsonFields(reflect.TypeOf(known).Elem()) {
		// An empty value of a known field stays too: omitempty would drop it on re-write
		// (OCM writes mediaType: "", for one); a known field that is set wins on re-write.
		if !emptyJSON(all[k]) {
			delete(all, k)
		}
	}
	*extra = nil
	if len(all) > 0 {
		*extra = all
	}
	return nil
}

// marshalKnown encodes known and adds the extra fields (known fields win).
func marshalKnown(known any, extra Extra) ([]byte, error) {
	data, err := json.Marshal(known)
	if err != nil || len(extra) == 0 {
		return data, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

func emptyJSON(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case `""`, "false", "0", "[]", "{}", "null":
		return true
	}
	return false
}

// jsonFields are the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// The JSON methods of the descriptor types: each decodes into a method-less copy of itself and
// keeps the rest in Extra.

func (cd *ComponentDescriptor) UnmarshalJSON(b []byte) error {
	type plain ComponentDescriptor
	return unmarshalKnown(b, (*plain)(cd), &cd.Extra)
}

func (cd ComponentDescriptor) MarshalJSON() ([]byte, error) {
	type plain ComponentDescriptor
	return marshalKnown(plain(cd), cd.Extra)
}

func (m *Meta) UnmarshalJSON(b []byte) error {
	type plain Meta
	return unmarshalKnown(b, (*plain)(m), &m.Extra)
}

func (m Meta) MarshalJSON() ([]byte, error) {
	type plain Meta
	return marshalKnown(plain(m), m.Extra)
}

func (c *Component) UnmarshalJSON(b []byte) error {
	type plain Component
	return unmarshalKnown(b, (*plain)(c), &c.Extra)
}

func (c Component) MarshalJSON() ([]byte, error) {
	type plain Component
	return marshalKnown(plain(c), c.Extra)
}

func (l *Label) UnmarshalJSON(b []byte) error {
	type plain Label
	return unmarshalKnown(b, (*plain)(l), &l.Extra)
}

func (l Label) MarshalJSON() ([]byte, error) {
	type plain Label
	return marshalKnown(plain(l), l.Extra)
}

func (r *RepositoryContext) UnmarshalJSON(b []byte) error {
	type plain RepositoryContext
	return unmarshalKnown(b, (*plain)(r), &r.Extra)
}

func (r RepositoryContext) MarshalJSON() ([]byte, error) {
	type plain RepositoryContext
	return marshalKnown(plain(r), r.Extra)
}

func (s *Source) UnmarshalJSON(b []byte) error {
	type plain Source
	return unmarshalKnown(b, (*plain)(s), &s.Extra)
}

func (s Source) MarshalJSON() ([]byte, error) {
	type plain Source
	return marshalKnown(plain(s), s.Extra)
}

func (c *ComponentReference) UnmarshalJSON(b []byte) error {
	type plain ComponentReference
	return unmarshalKnown(b, (*plain)(c), &c.Extra)
}

func (c ComponentReference) MarshalJSON() ([]byte, error) {
	type plain ComponentReference
	return marshalKnown(plain(c), c.Extra)
}

func (r *Resource) UnmarshalJSON(b []byte) error {
	type plain Resource
	return unmarshalKnown(b, (*plain)(r), &r.Extra)
}

func (r Resource) MarshalJSON() ([]byte, error) {
	type plain Resource
	return marshalKnown(plain(r), r.Extra)
}

func (a *Access) UnmarshalJSON(b []byte) error {
	type plain Access
	return unmarshalKnown(b, (*plain)(a), &a.Extra)
}

func (a Access) MarshalJSON() ([]byte, error) {
	type plain Access
	return marshalKnown(plain(a), a.Extra)
}

func (s *Signature) UnmarshalJSON(b []byte) error {
	type plain Signature
	return unmarshalKnown(b, (*plain)(s), &s.Extra)
}

func (s Signature) MarshalJSON() ([]byte, error) {
	type plain Signature
	return marshalKnown(plain(s), s.Extra)
}

func (s *SignatureSpec) UnmarshalJSON(b []byte) error {
	type plain SignatureSpec
	return unmarshalKnown(b, (*plain)(s), &s.Extra)
}

func (s SignatureSpec) MarshalJSON() ([]byte, error) {
	type plain SignatureSpec
	return marshalKnown(plain(s), s.Extra)
}
