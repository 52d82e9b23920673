package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
	"sigs.k8s.io/yaml"
)

// table is rows of cells under a header.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// print writes v as JSON or YAML, or t as a table that fits the terminal.
func (a *app) print(v any, t func() table) error {
	switch a.output {
	case "json":
		enc := json.NewEncoder(a.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		raw, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = a.io.Out.Write(raw)
		return err
	}
	tb := t()
	tb.write(a.io.Out, a.width())
	return nil
}

// width is the terminal width tables fit, 0 for no limit (not a terminal, no COLUMNS).
func (a *app) width() int {
	if a.io.Width > 0 {
		return a.io.Width
	}
	if f, ok := a.io.Out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	if w, err := strconv.Atoi(a.io.Getenv("COLUMNS")); err == nil && w > 0 {
		return w
	}
	return 0
}

const (
	colGap   = 2
	minWidth = 6
)

// write prints the table; with a width, the widest columns are cut (ending in "…") until the
// rows fit.
func (t table) write(w io.Writer, width int) {
	widths := t.layout(width)
	writeRow(w, widths, t.header)
	for _, r := range t.rows {
		writeRow(w, widths, r)
	}
}

// tableStream prints a table whose rows come later (kcp events --follow): the columns keep the
// widths of the first rows; a longer cell is cut.
type tableStream struct {
	w      io.Writer
	widths []int
}

// newTableStream prints first (its header and rows) and returns the stream for later rows;
// typical is a row as wide as later rows usually are (first may have none), for the layout only.
func newTableStream(w io.Writer, first table, width int, typical []string) *tableStream {
	sized := first
	sized.rows = append(slices.Clone(first.rows), typical)
	widths := sized.layout(width)
	// The last column (a message) takes what the others leave, all of it without a width.
	last := len(widths) - 1
	widths[last] = math.MaxInt
	if width > 0 {
		widths[last] = max(minWidth, width-total(widths[:last])-colGap)
	}
	writeRow(w, widths, first.header)
	s := &tableStream{w: w, widths: widths}
	s.rows(first.rows)
	return s
}

func (s *tableStream) rows(rows [][]string) {
	for _, r := range rows {
		writeRow(s.w, s.widths, r)
	}
}

// layout is the width of each column: the widest cell, cut down until the rows fit width.
func (t table) layout(width int) []int {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	if width > 0 {
		// IDs are what operators copy: other columns are cut first.
		protected := make([]bool, len(t.header))
		for i, h := range t.header {
			protected[i] = strings.HasSuffix(h, " ID")
		}
		// The last column (a description, a message) gives way first.
		last := len(widths) - 1
		for total(widths) > width && !protected[last] && widths[last] > max(minWidth, utf8.RuneCountInString(t.header[last])) {
			widths[last]--
		}
		// Then the widest other columns, first not below their header, then down to minWidth.
		for _, floorHeader := range []bool{true, false} {
			for total(widths) > width {
				widest := -1
				for _, keep := range []bool{false, true} {
					for i := range widths {
						floor := minWidth
						if floorHeader {
							floor = max(minWidth, utf8.RuneCountInString(t.header[i]))
						}
						if protected[i] == keep && widths[i] > floor && (widest < 0 || widths[i] > widths[widest]) {
							widest = i
						}
					}
					if widest >= 0 {
						break
					}
				}
				if widest < 0 {
					break
				}
				widths[widest]--
			}
		}
	}
	return widths
}

func writeRow(w io.Writer, widths []int, cells []string) {
	var b strings.Builder
	for i, c := range cells {
		c = cut(c, widths[i])
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+colGap))
		}
	}
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
}

func total(widths []int) int {
	n := colGap * (len(widths) - 1)
	for _, w := range widths {
		n += w
	}
	return n
}

// cut shortens s to n runes, marking the cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// fields prints key/value pairs of one object.
func fields(pairs ...string) table {
	t := table{header: []string{"FIELD", "VALUE"}}
	for i := 0; i+1 < len(pairs); i += 2 {
		t.add(pairs[i], pairs[i+1])
	}
	return t
}

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
