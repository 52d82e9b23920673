// Package jsonappend writes JSON as encoding/json does, by appending to a byte slice without
// reflection: for documents written on hot paths (an operation's progress on every save, a
// stand-in's tally on every request).
package jsonappend

import (
	"maps"
	"slices"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// String appends s quoted as encoding/json does: HTML-safe, invalid UTF-8 as U+FFFD, U+2028
// and U+2029 escaped.
func String(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// SortedMap appends m as a JSON object with its keys sorted, as encoding/json does; value
// appends one value.
func SortedMap[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(String(b, k), ':')
		var err error
		if b, err = value(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
