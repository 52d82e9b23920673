package docs_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The docs test: every fenced block of README.md and docs/**/*.md says its language, and every
// shell block (sh, bash, shell, console) either runs as written (TestDocCommandsRun) or says
// why it cannot, with an annotation on the line right before it:
//
//	<!-- docs-test: skip reason="needs a Docker daemon" -->   not run, for the reason given
//	<!-- docs-test: background -->                            runs in the background (a server the
//	                                                          reader starts in its own terminal);
//	                                                          the following blocks wait for it
//
// and, anywhere in a file, for blocks another package's test runs as written:
//
//	<!-- docs-test: run-by="cmd/kyma TestModulesDocWalkthrough" lang="bash" -->
//
// A ```console block is a transcript: only its "$ " lines run (a line ending in \ continues on
// the next); the lines after a command are its output, of which the test checks the exit status
// (output starting with "Error:" means the command fails) and the first word.

// shellLangs are the fence languages whose blocks are commands.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// docBlock is one fenced block of a markdown file.
type docBlock struct {
	file string // relative to the repository root, slash-separated
	line int    // 1-based line of the opening fence
	lang string
	text string // the lines between the fences, unindented as far as the fence was, each ending in \n
	// annotation on the line before the opening fence
	skip       string // the reason, when skipped
	background bool
	runBy      string // "pkg TestName", from a file-level annotation for the block's language
	badNote    string // an annotation the test does not understand
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (```%s)", b.file, b.line, b.lang) }

// runnable reports whether the docs test runs the block itself.
func (b docBlock) runnable() bool {
	return shellLangs[b.lang] && b.skip == "" && b.runBy == ""
}

var (
	fenceRe      = regexp.MustCompile("^( *)(```+)\\s*([A-Za-z0-9_+-]*)\\s*$")
	annotationRe = regexp.MustCompile(`^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$`)
	noteArgRe    = regexp.MustCompile(`^([a-z-]+)(?:="([^"]*)")?\s*`)
)

// parseNote parses the words of an annotation: key or key="value", separated by spaces.
func parseNote(s string) (map[string]string, error) {
	args := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; {
		m := noteArgRe.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("cannot read %q (want key or key=\"value\")", s)
		}
		args[m[1]] = m[2]
		s = s[len(m[0]):]
	}
	return args, nil
}

// docFiles are the markdown files whose blocks the docs test checks, relative to the root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files[1:])
	return files
}

// parseDoc returns the fenced blocks of a markdown file; it fails on an unclosed fence.
func parseDoc(root, file string) ([]docBlock, error) {
	raw, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	lines := strings.Split(string(raw), "\n")
	// File-level run-by annotations (any line of the file), by language.
	runBy := map[string]string{}
	for _, l := range lines {
		if m := annotationRe.FindStringSubmatch(l); m != nil && strings.Contains(m[1], "run-by=") {
			args, err := parseNote(m[1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if args["lang"] == "" {
				return nil, fmt.Errorf("%s: run-by annotation without lang=\"...\"", file)
			}
			runBy[args["lang"]] = args["run-by"]
		}
	}
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence := m[1], m[2]
		b := docBlock{file: file, line: i + 1, lang: m[3], runBy: runBy[m[3]]}
		if i > 0 {
			if n := annotationRe.FindStringSubmatch(lines[i-1]); n != nil {
				args, err := parseNote(n[1])
				switch {
				case err != nil:
					b.badNote = err.Error()
				case len(args) == 1 && args["background"] == "" && hasKey(args, "background"):
					b.background = true
				case len(args) == 1 && hasKey(args, "skip"):
					b.badNote = `skip needs reason="why it cannot run here"`
				case len(args) == 2 && hasKey(args, "skip") && args["reason"] != "":
					b.skip = args["reason"]
				default:
					b.badNote = fmt.Sprintf("unknown annotation %q", n[1])
				}
			}
		}
		var body strings.Builder
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == fence || (strings.HasPrefix(strings.TrimSpace(lines[i]), fence) && strings.Trim(strings.TrimSpace(lines[i]), "`") == "") {
				closed = true
				break
			}
			body.WriteString(strings.TrimPrefix(lines[i], indent) + "\n")
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: the fence is never closed", file, b.line)
		}
		b.text = body.String()
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// TestDocBlocksClassified: every fenced block says its language, and every shell block runs in
// TestDocCommandsRun, is run by a named test, or says why it cannot run.
func TestDocBlocksClassified(t *testing.T) {
	root := ".."
	total, runnable := 0, 0
	for _, f := range docFiles(t, root) {
		blocks, err := parseDoc(root, f)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range blocks {
			total++
			switch {
			case b.lang == "":
				t.Errorf("%s: a fenced block without a language: say ```sh or ```bash (commands, run by the docs test), ```console (a transcript with \"$ \" prompts), or what it is (```text, ```json, ```yaml...)", b)
			case b.badNote != "":
				t.Errorf("%s: %s", b, b.badNote)
			case !shellLangs[b.lang] && (b.skip != "" || b.background):
				t.Errorf("%s: a docs-test annotation on a block that is not commands", b)
			case b.lang == "console" && !strings.HasPrefix(b.text, "$ ") && !strings.Contains(b.text, "\n$ "):
				t.Errorf("%s: a console transcript without a \"$ \" prompt line", b)
			case b.lang != "console" && shellLangs[b.lang] && (strings.HasPrefix(b.text, "$ ") || strings.Contains(b.text, "\n$ ")):
				t.Errorf("%s: a transcript (\"$ \" prompts): make it ```console, whose prompt lines run and whose output is checked", b)
			}
			if b.runnable() {
				runnable++
			}
		}
	}
	for _, rb := range runByTests(t, root) {
		checkRunBy(t, root, rb)
	}
	if runnable < 20 {
		t.Errorf("only %d of %d blocks run: the docs test runs too little", runnable, total)
	}
}

type runByNote struct{ file, lang, target string }

func runByTests(t *testing.T, root string) []runByNote {
	t.Helper()
	var out []runByNote
	for _, f := range docFiles(t, root) {
		blocks, err := parseDoc(root, f)
		if err != nil {
			continue // reported above
		}
		seen := map[string]bool{}
		for _, b := range blocks {
			if b.runBy != "" && !seen[b.lang] {
				seen[b.lang] = true
				out = append(out, runByNote{f, b.lang, b.runBy})
			}
		}
	}
	return out
}

// checkRunBy: the named test exists, and its package's tests read the file and its blocks of
// that language.
func checkRunBy(t *testing.T, root string, rb runByNote) {
	t.Helper()
	pkg, name, ok := strings.Cut(rb.target, " ")
	if !ok {
		t.Errorf("%s: run-by=%q: want \"<package dir> <TestName>\"", rb.file, rb.target)
		return
	}
	tests, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*_test.go"))
	found := false
	for _, tf := range tests {
		src, err := os.ReadFile(tf)
		if err != nil {
			t.Fatal(err)
		}
		s := string(src)
		if strings.Contains(s, "func "+name+"(t *testing.T)") && strings.Contains(s, "```"+rb.lang) &&
			(strings.Contains(s, filepath.Base(rb.file)) || strings.Contains(s, strings.TrimSuffix(filepath.Base(rb.file), ".md"))) {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: run-by=%q: no test %s in %s that reads this file's ```%s blocks", rb.file, rb.target, name, pkg, rb.lang)
	}
}
