package externals

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/avs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/director"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/edp"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/eventhubs"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/ias"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/reconciler"
	"github.com/kyma-project/kyma-environment-broker/internal/clients/servicemanager"
	"github.com/stretchr/testify/require"
)

var updateUsage = flag.Bool("update", false, "rewrite testdata/client_config_usage.txt")

// usageTemplate prints each variable envconfig reads, with its type and default.
const usageTemplate = "{{range .}}{{.Key}} {{.Field.Type}} {{.Tags.Get \"default\"}}\n{{end}}"

// TestClientConfigVariablesStayTheSame pins every client's APP_* variables, types and defaults
// (recorded before the clients' shared fields moved into clientkit.Config): a refactoring of the
// configuration structs must not rename or re-default a variable operators set.
func TestClientConfigVariablesStayTheSame(t *testing.T) {
	var buf bytes.Buffer
	for _, c := range []struct {
		name string
		spec any
	}{
		{"avs", &avs.Config{}}, {"director", &director.Config{}}, {"edp", &edp.Config{}}, {"eventhubs", &eventhubs.Config{}},
		{"ias", &ias.Config{}}, {"reconciler", &reconciler.Config{}}, {"servicemanager", &servicemanager.Config{}},
		{"settings", &Settings{}},
	} {
		var one bytes.Buffer
		require.NoError(t, envconfig.Usagef("APP", c.spec, &one, usageTemplate))
		// Sorted: the order of fields in a struct is no contract.
		lines := strings.Split(strings.TrimSpace(one.String()), "\n")
		sort.Strings(lines)
		buf.WriteString("# " + c.name + "\n" + strings.Join(lines, "\n") + "\n")
	}
	path := filepath.Join("testdata", "client_config_usage.txt")
	if *updateUsage {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), buf.String())
}
