package smstandin

import (
	"fmt"
	"slices"
	"strings"
)

// criterion is one `field eq 'value'` condition of a fieldQuery.
type criterion struct{ field, value string }

// parseFieldQuery parses the fieldQuery forms the broker sends: `field eq 'value'` conditions joined by
// `and`, a quote inside a value doubled. Other operators, unknown fields and malformed queries are
// errors naming the problem. An empty query selects everything.
func parseFieldQuery(q string, allowed ...string) ([]criterion, error) {
	p := &queryParser{s: q}
	p.skipSpace()
	if p.done() {
		return nil, nil
	}
	var out []criterion
	for {
		field := p.word()
		if field == "" {
			return nil, p.errorf("expected a field name")
		}
		if !slices.Contains(allowed, field) {
			return nil, fmt.Errorf("fieldQuery: unsupported field %q (supported: %s)", field, strings.Join(allowed, ", "))
		}
		p.skipSpace()
		switch op := p.word(); op {
		case "eq":
		case "":
			return nil, p.errorf("expected an operator after %q", field)
		default:
			return nil, fmt.Errorf("fieldQuery: unsupported operator %q (only eq is supported)", op)
		}
		p.skipSpace()
		value, err := p.quoted()
		if err != nil {
			return nil, err
		}
		out = append(out, criterion{field: field, value: value})
		p.skipSpace()
		if p.done() {
			return out, nil
		}
		if w := p.word(); w != "and" {
			return nil, p.errorf("expected \"and\" or the end of the query, found %q", w)
		}
		p.skipSpace()
	}
}

// matches tells whether an object whose fields are fields meets every criterion.
func matches(crit []criterion, fields map[string]string) bool {
	for _, c := range crit {
		if fields[c.field] != c.value {
			return false
		}
	}
	return true
}

type queryParser struct {
	s string
	i int
}

func (p *queryParser) done() bool { return p.i >= len(p.s) }

func (p *queryParser) errorf(format string, args ...any) error {
	return fmt.Errorf("fieldQuery: %s at offset %d of %q", fmt.Sprintf(format, args...), p.i, p.s)
}

func (p *queryParser) skipSpace() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

// word reads a field name or keyword: letters, digits and underscores.
func (p *queryParser) word() string {
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			break
		}
		p.i++
	}
	return p.s[start:p.i]
}

// quoted reads a value in single quotes, where two quotes in a row stand for one.
func (p *queryParser) quoted() (string, error) {
	if p.done() || p.s[p.i] != '\'' {
		return "", p.errorf("expected a value in single quotes")
	}
	start := p.i
	p.i++
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		if c != '\'' {
			b.WriteByte(c)
			continue
		}
		if !p.done() && p.s[p.i] == '\'' {
			b.WriteByte('\'')
			p.i++
			continue
		}
		return b.String(), nil
	}
	p.i = start
	return "", p.errorf("unterminated quoted value")
}
