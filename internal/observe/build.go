// Package observe is what the processes share to be observed: their build (version and
// commit, for --version and keb_build_info), OpenTelemetry tracing configured by the standard
// OTEL_* variables, the trace of an operation, the HTTP request metrics and the expiry of the
// certificates a process holds.
package observe

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// Build is what the Go toolchain recorded about this binary.
type Build struct {
	// Version is the main module's version: a tag, a pseudo-version, or "(devel)" for a build
	// from a checkout.
	Version string
	// Commit is the VCS revision the binary was built from ("unknown" when the build did not
	// record it, e.g. `go run` or -buildvcs=false).
	Commit string
	// Modified: the work tree had changes not in Commit.
	Modified  bool
	GoVersion string
}

// ReadBuild reads the binary's build information.
func ReadBuild() Build {
	b := Build{Version: "(devel)", Commit: "unknown", GoVersion: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = info.GoVersion
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the version line of command name.
func (b Build) String() string {
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("version %s, commit %s, %s", b.Version, commit, b.GoVersion)
}

// PrintVersion writes command name's version line.
func PrintVersion(w io.Writer, name string) {
	fmt.Fprintf(w, "%s %s\n", name, ReadBuild())
}

// IsVersionArg tells whether args (without the program name) ask only for the version
// (`version`, `--version` or `-version`), for commands without cobra.
func IsVersionArg(args []string) bool {
	return len(args) == 1 && (args[0] == "version" || args[0] == "--version" || args[0] == "-version")
}

// AddVersion gives a cobra root command `version` and `--version`.
func AddVersion(root *cobra.Command) {
	root.Version = ReadBuild().String()
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version and commit this binary was built from",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { PrintVersion(cmd.OutOrStdout(), root.Name()) },
	})
}

// RegisterBuildInfo registers keb_build_info: 1, labelled with the version and commit.
func RegisterBuildInfo(reg prometheus.Registerer) error {
	b := ReadBuild()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "keb_build_info", Help: "The binary's build: always 1, labelled with its version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": b.GoVersion},
	})
	g.Set(1)
	return reg.Register(g)
}
