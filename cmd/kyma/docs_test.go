package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/module/moduletest"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
	"github.com/kyma-project/kyma-environment-broker/internal/testenv/kubetest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readModulesDoc(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "docs", "user", "modules.md"))
	require.NoError(t, err)
	return string(data)
}

var bashBlock = regexp.MustCompile("(?s)```bash\n(.*?)```")

// The walkthrough in docs/user/modules.md runs as written: every bash block, in order, in an empty
// directory, against a real registry and kube-apiserver (with a stand-in controller reporting
// modules Ready).
func TestModulesDocWalkthrough(t *testing.T) {
	doc := readModulesDoc(t)
	blocks := bashBlock.FindAllStringSubmatch(doc, -1)
	require.GreaterOrEqual(t, len(blocks), 8)
	var script strings.Builder
	script.WriteString("set -euxo pipefail\n")
	for _, b := range blocks {
		script.WriteString(b[1])
	}

	bin := buildKyma(t)
	srv := moduletest.Start(t, moduletest.Options{})
	ns := kubetest.Namespace(t)
	moduletest.RunReadyController(t, kubetest.Dynamic(t), ns)
	work := t.TempDir()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, kubetest.Kubeconfig(t), 0o600))

	r := runKyma("bash", work, []string{
		"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"),
		"REGISTRY=" + srv.Addr, "KYMA_NAMESPACE=" + ns, "KUBECONFIG=" + kubeconfig,
		"DOCKER_CONFIG=" + t.TempDir(),
	}, "-c", script.String())
	require.NoError(t, r.err, "walkthrough failed:\n%s\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "module sample is Ready")
	assert.Contains(t, r.stdout, "module sample disabled")
}

// Every command and flag of the CLI is documented.
func TestModulesDocCoversEveryFlag(t *testing.T) {
	doc := readModulesDoc(t)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.HasSubCommands() && c.Name() != "help" && c.Name() != "completion" {
			assert.Contains(t, doc, strings.TrimPrefix(c.CommandPath(), "kyma ")+"", "command %s", c.CommandPath())
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" {
					assert.Contains(t, doc, "--"+f.Name, "flag --%s of %s", f.Name, c.CommandPath())
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(os.Stdout, os.Stderr))
}
