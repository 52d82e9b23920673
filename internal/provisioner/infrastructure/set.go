package infrastructure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Config selects the named set of backends. It is read with envconfig.Process("APP", &cfg):
//
//	APP_PROVISIONER_SET_JSON         {"<name>": {"type": "gardener|kubernetes|static|simulated", "spec": {...}}, ...}
//	APP_PROVISIONER_SET_FILE         the same document in a file, JSON or YAML
//	APP_DEFAULT_PROVISIONER          the entry used for runtimes that do not name one
//	RILL_ADMIN_PROVISIONER_SET_JSON  seed 004's name for APP_PROVISIONER_SET_JSON
//	RILL_ADMIN_DEFAULT_PROVISIONER   seed 004's name for APP_DEFAULT_PROVISIONER
//
// Precedence: an APP_ name wins over the seed's RILL_ADMIN_ name; both set to different values
// is an error (one of them would be ignored). JSON documents may carry // comments outside
// strings, as the seed's example does. With no set configured it is
// {"simulated": {"type": "simulated", "spec": {}}}. CheckEnvironment rejects a set or default
// given under any other name.
type Config struct {
	SetJSON string `envconfig:"PROVISIONER_SET_JSON"`
	SetFile string `envconfig:"PROVISIONER_SET_FILE"`
	// Default may be empty when the set has exactly one entry.
	Default string `envconfig:"DEFAULT_PROVISIONER"`
	// RillSetJSON and RillDefault are the seed's names (envconfig reads an unprefixed tag when
	// the APP_ one is unset).
	RillSetJSON string `envconfig:"RILL_ADMIN_PROVISIONER_SET_JSON"`
	RillDefault string `envconfig:"RILL_ADMIN_DEFAULT_PROVISIONER"`
}

// Accepted names of the set's variables (see Config).
const (
	EnvSetJSON     = "APP_PROVISIONER_SET_JSON"
	EnvSetFile     = "APP_PROVISIONER_SET_FILE"
	EnvDefault     = "APP_DEFAULT_PROVISIONER"
	EnvRillSetJSON = "RILL_ADMIN_PROVISIONER_SET_JSON"
	EnvRillDefault = "RILL_ADMIN_DEFAULT_PROVISIONER"
)

// CheckEnvironment fails when environ (os.Environ()) configures a provisioner set or default
// under a name that is not one of the accepted ones (APP_PROVISIONER_SETS_JSON,
// PROVISIONER_SET_JSON, APP_RILL_ADMIN_PROVISIONER_SET_JSON...): such a set would otherwise
// be ignored and the runtimes silently go to another backend.
func CheckEnvironment(environ []string) error {
	accepted := map[string]bool{EnvSetJSON: true, EnvSetFile: true, EnvDefault: true, EnvRillSetJSON: true, EnvRillDefault: true}
	var stray []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if accepted[name] || value == "" {
			continue
		}
		if strings.Contains(upper, "PROVISIONER_SET") || strings.Contains(upper, "DEFAULT_PROVISIONER") {
			stray = append(stray, name)
		}
	}
	if len(stray) > 0 {
		sort.Strings(stray)
		return fmt.Errorf("provisioner set: %s would be ignored: configure the set with %s (or %s, or %s) and the default with %s (or %s)",
			strings.Join(stray, ", "), EnvSetJSON, EnvSetFile, EnvRillSetJSON, EnvDefault, EnvRillDefault)
	}
	return nil
}

// resolve applies the precedence between the APP_ names and the seed's names.
func (c Config) resolve() (Config, error) {
	if c.RillSetJSON != "" {
		switch {
		case c.SetJSON != "" && c.SetJSON != c.RillSetJSON:
			return c, fmt.Errorf("provisioner set: %s and %s are both set and differ: set only one", EnvSetJSON, EnvRillSetJSON)
		case c.SetFile != "":
			return c, fmt.Errorf("provisioner set: %s and %s are both set: set only one", EnvSetFile, EnvRillSetJSON)
		}
		c.SetJSON = c.RillSetJSON
	}
	if c.RillDefault != "" {
		if c.Default != "" && c.Default != c.RillDefault {
			return c, fmt.Errorf("provisioner set: %s and %s are both set and differ: set only one", EnvDefault, EnvRillDefault)
		}
		c.Default = c.RillDefault
	}
	c.RillSetJSON, c.RillDefault = "", ""
	return c, nil
}

// StripComments removes // comments that are outside JSON strings (the seed writes its example
// set with them), keeping line breaks so that parse errors still point at the right line.
func StripComments(doc []byte) []byte {
	out := make([]byte, 0, len(doc))
	inString, escaped := false, false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(doc) && doc[i+1] == '/':
			for i < len(doc) && doc[i] != '\n' {
				i++
			}
			if i < len(doc) {
				out = append(out, '\n')
			}
			continue
		}
		out = append(out, c)
	}
	return out
}

// DefaultSetName is the name (and type) of the entry used when no set is configured.
const DefaultSetName = "simulated"

// Entry is one configured backend.
type Entry struct {
	Name string
	Type string
	// Spec is the entry's "spec" object, decoded by the backend type (see DecodeSpec).
	Spec json.RawMessage
}

// Deps are what backends may need besides their spec.
type Deps struct {
	// Static keeps the slots of static pools.
	Static storage.StaticAllocations
	Log    logrus.FieldLogger
}

// Factory builds the backend of one entry. Errors name the spec field at fault
// ("spec.runtimes[1].slots must be > 0"); NewSet prefixes the entry.
type Factory func(ctx context.Context, e Entry, deps Deps) (Backend, error)

// Types maps a backend type name to its factory.
type Types map[string]Factory

// ErrUnknownBackend: the set has no entry of that name.
var ErrUnknownBackend = errors.New("unknown provisioner")

// Set is the configured named backends.
type Set struct {
	members map[string]member
	names   []string
	def     string
}

type member struct {
	typ     string
	backend Backend
}

// NewSet loads the set that cfg describes and builds each entry with its type's factory.
// Bad configuration is an error naming the entry and field.
func NewSet(ctx context.Context, cfg Config, deps Deps, types Types) (*Set, error) {
	if deps.Log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		deps.Log = l
	}
	entries, def, err := LoadSet(cfg)
	if err != nil {
		return nil, err
	}
	s := &Set{members: make(map[string]member, len(entries)), def: def}
	for _, e := range entries {
		f, ok := types[e.Type]
		if !ok {
			return nil, fmt.Errorf("provisioner set entry %q: unknown type %q (known: %s)", e.Name, e.Type, strings.Join(sortedKeys(types), ", "))
		}
		b, err := f(ctx, e, Deps{Static: deps.Static, Log: deps.Log.WithField("provisioner", e.Name)})
		if err != nil {
			return nil, fmt.Errorf("provisioner set entry %q: %w", e.Name, err)
		}
		s.members[e.Name] = member{typ: e.Type, backend: b}
		s.names = append(s.names, e.Name)
	}
	return s, nil
}

// LoadSet reads and checks the set document (not the entries' specs) and returns its entries
// sorted by name and the default entry's name.
func LoadSet(cfg Config) ([]Entry, string, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, "", err
	}
	var doc []byte
	switch {
	case cfg.SetJSON != "" && cfg.SetFile != "":
		return nil, "", errors.New("provisioner set: set either APP_PROVISIONER_SET_JSON or APP_PROVISIONER_SET_FILE, not both")
	case cfg.SetJSON != "":
		doc = StripComments([]byte(cfg.SetJSON))
	case cfg.SetFile != "":
		b, err := os.ReadFile(cfg.SetFile)
		if err != nil {
			return nil, "", fmt.Errorf("provisioner set: reading APP_PROVISIONER_SET_FILE: %w", err)
		}
		// YAML takes # comments; a JSON file may carry the seed's // comments.
		if trimmed := bytes.TrimSpace(b); len(trimmed) > 0 && trimmed[0] == '{' {
			b = StripComments(b)
		}
		if doc, err = yaml.YAMLToJSON(b); err != nil {
			return nil, "", fmt.Errorf("provisioner set: parsing %s: %w", cfg.SetFile, err)
		}
	default:
		def := cfg.Default
		if def == "" {
			def = DefaultSetName
		}
		if def != DefaultSetName {
			return nil, "", fmt.Errorf("provisioner set: APP_DEFAULT_PROVISIONER is %q but no set is configured (the built-in set has only %q)", def, DefaultSetName)
		}
		return []Entry{{Name: DefaultSetName, Type: "simulated", Spec: json.RawMessage(`{}`)}}, def, nil
	}

	var raw map[string]json.RawMessage
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, "", fmt.Errorf("provisioner set: must be a JSON object of name -> {type, spec}: %w", err)
	}
	if len(raw) == 0 {
		return nil, "", errors.New("provisioner set: no entries")
	}
	entries := make([]Entry, 0, len(raw))
	for _, name := range sortedKeys(raw) {
		e, err := parseEntry(name, raw[name])
		if err != nil {
			return nil, "", fmt.Errorf("provisioner set entry %q: %w", name, err)
		}
		entries = append(entries, e)
	}
	def := cfg.Default
	switch {
	case def == "" && len(entries) == 1:
		def = entries[0].Name
	case def == "":
		return nil, "", fmt.Errorf("provisioner set: APP_DEFAULT_PROVISIONER is not set: name one of %s", quoted(sortedKeys(raw)))
	default:
		if _, ok := raw[def]; !ok {
			return nil, "", fmt.Errorf("provisioner set: APP_DEFAULT_PROVISIONER %q is not in the set (available: %s)", def, quoted(sortedKeys(raw)))
		}
	}
	return entries, def, nil
}

func parseEntry(name string, raw json.RawMessage) (Entry, error) {
	if strings.TrimSpace(name) == "" {
		return Entry{}, errors.New("the name is empty")
	}
	var e struct {
		Type string          `json:"type"`
		Spec json.RawMessage `json:"spec"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("must be {\"type\": ..., \"spec\": {...}}: %w", err)
	}
	if e.Type == "" {
		return Entry{}, errors.New("type is required")
	}
	spec := bytes.TrimSpace(e.Spec)
	if len(spec) == 0 || bytes.Equal(spec, []byte("null")) {
		spec = []byte(`{}`)
	}
	if spec[0] != '{' {
		return Entry{}, errors.New("spec must be an object")
	}
	return Entry{Name: name, Type: e.Type, Spec: json.RawMessage(spec)}, nil
}

// DecodeSpec decodes an entry's spec into v, rejecting unknown fields.
func DecodeSpec(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("spec.%s must be %s, not a JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("spec: %w", err)
	}
	return nil
}

// Get returns the named backend; the empty name is the default.
func (s *Set) Get(name string) (Backend, error) {
	m, err := s.member(name)
	if err != nil {
		return nil, err
	}
	return m.backend, nil
}

// Type returns the type of the named backend; the empty name is the default.
func (s *Set) Type(name string) (string, error) {
	m, err := s.member(name)
	if err != nil {
		return "", err
	}
	return m.typ, nil
}

func (s *Set) member(name string) (member, error) {
	if name == "" {
		name = s.def
	}
	m, ok := s.members[name]
	if !ok {
		return member{}, fmt.Errorf("%w %q: available are %s", ErrUnknownBackend, name, quoted(s.names))
	}
	return m, nil
}

// Names are the entries' names, sorted.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// Default is the default entry's name.
func (s *Set) Default() string { return s.def }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
