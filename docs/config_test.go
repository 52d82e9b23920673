package docs_test

import (
	"bytes"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/app"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/logging"
	provisionerconfig "github.com/kyma-project/kyma-environment-broker/internal/provisioner/config"
	"github.com/kyma-project/kyma-environment-broker/internal/runtimeagent"
)

// undocumented are variables the code reads that docs/user/configuration.md leaves out on purpose.
var undocumented = map[string]string{}

// configSpec is one struct a process reads with envconfig.Process(prefix, spec).
type configSpec struct {
	prefix string
	spec   any
}

// configSpecs lists every configuration struct the processes read: the broker's parts (as
// app.Load reads them), the provisioner's, the runtime agent's and logging.
func configSpecs() []configSpec { // documented in configuration.md
	var specs []configSpec
	var cfg app.Config
	specs = append(specs, configSpec{"APP", &cfg})
	// app.Load reads each ignored part on its own, APP_RUNTIME for the runtime defaults.
	v := reflect.ValueOf(&cfg).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Tag.Get("ignored") != "true" {
			continue
		}
		if f.Name == "Externals" { // externals.Load reads each of its parts on its own
			ev := v.Field(i)
			for j := 0; j < ev.NumField(); j++ {
				if ev.Field(j).Kind() != reflect.Struct {
					continue // not configuration (the account pool's logger)
				}
				specs = append(specs, configSpec{"APP", ev.Field(j).Addr().Interface()})
			}
			continue
		}
		prefix := "APP"
		if f.Name == "Runtime" {
			prefix = "APP_RUNTIME"
		}
		specs = append(specs, configSpec{prefix, v.Field(i).Addr().Interface()})
	}
	return append(specs, configSpec{"APP", &provisionerconfig.Config{}}, configSpec{"APP", &director.Config{}},
		configSpec{"APP", &logging.Config{}})
}

// codeDefaults maps every variable the processes read to its default ("" when none).
func codeDefaults(t *testing.T, specs []configSpec) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range specs {
		var buf bytes.Buffer
		if err := envconfig.Usagef(s.prefix, s.spec, &buf, "{{range .}}{{.Key}}\t{{.Field.Type}}\t{{.Tags.Get \"default\"}}\n{{end}}"); err != nil {
			t.Fatalf("listing %T: %v", s.spec, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			key, rest, _ := strings.Cut(line, "\t")
			typ, def, _ := strings.Cut(rest, "\t")
			if def == "" && typ == "bool" {
				def = "false" // what envconfig leaves an unset bool
			}
			if prev, ok := out[key]; ok && prev != def {
				t.Errorf("%s has default %q in one struct and %q in another (%T)", key, prev, def, s.spec)
			}
			out[key] = def
		}
	}
	return out
}

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	upperName  = regexp.MustCompile(`^[A-Z][A-Z_]*$`)
)

// docDefaults maps every variable documented in configuration.md's tables to its documented
// default: "" for an empty cell; ok is false when the cell describes rather than lists it.
func docDefaults(t *testing.T, path string) map[string]struct {
	def string
	ok  bool
} {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		def string
		ok  bool
	}{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
		// A row of APP_<SYSTEM>_X stands for every system its meaning lists (`AVS`, `EDP`, ...).
		if len(names) > 0 && strings.Contains(names[0], "<SYSTEM>") {
			var systems []string
			for _, m := range backticked.FindAllStringSubmatch(cells[3], -1) {
				if upperName.MatchString(m[1]) {
					systems = append(systems, m[1])
				}
			}
			cell := strings.TrimSpace(cells[2])
			defs := backticked.FindAllStringSubmatch(cell, -1)
			for i, n := range names {
				for _, sys := range systems {
					e := struct {
						def string
						ok  bool
					}{}
					if len(defs) == len(names) {
						e.def, e.ok = defs[i][1], true
					}
					out[strings.ReplaceAll(n, "<SYSTEM>", sys)] = e
				}
			}
			continue
		}
		cell := strings.TrimSpace(cells[2])
		var defs []string
		for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
			defs = append(defs, m[1])
		}
		listed := cell == "" || (len(defs) == len(names) && strings.TrimSpace(backticked.ReplaceAllString(cell, "")) == strings.Repeat(",", len(names)-1))
		for i, n := range names {
			e := struct {
				def string
				ok  bool
			}{ok: listed}
			if listed && cell != "" {
				e.def = defs[i]
			}
			out[n] = e
		}
	}
	return out
}

// TestConfigurationDocListsEveryVariable keeps docs/user/configuration.md in step with the
// envconfig tags: every variable a process reads is documented, with the code's default.
func TestConfigurationDocListsEveryVariable(t *testing.T) {
	// The runtime agent runs in the runtimes, with its own page (some names mean other things there).
	checkDoc(t, "user/configuration.md", configSpecs())
	checkDoc(t, "user/runtime-agent.md", []configSpec{{"APP", &runtimeagent.Config{}}, {"APP", &logging.Config{}}})
}

func checkDoc(t *testing.T, path string, specs []configSpec) {
	code := codeDefaults(t, specs)
	doc := docDefaults(t, path)
	var missing, differ []string
	for key, def := range code {
		if _, ok := undocumented[key]; ok {
			continue
		}
		d, ok := doc[key]
		if !ok { // APP_X_* documents every APP_X_ variable, defaults elsewhere
			for name := range doc {
				if strings.HasSuffix(name, "*") && strings.HasPrefix(key, strings.TrimSuffix(name, "*")) {
					ok = true
				}
			}
		}
		switch {
		case !ok:
			missing = append(missing, key+" (default "+def+")")
		case d.ok && d.def != def:
			differ = append(differ, key+": documented "+d.def+", code "+def)
		}
	}
	sort.Strings(missing)
	sort.Strings(differ)
	if len(missing) > 0 {
		t.Errorf("%s lacks %d variables:\n%s", path, len(missing), strings.Join(missing, "\n"))
	}
	if len(differ) > 0 {
		t.Errorf("%s documents %d defaults the code does not have:\n%s", path, len(differ), strings.Join(differ, "\n"))
	}
}
