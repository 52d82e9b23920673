package sqlstore

import (
	"database/sql"
	"database/sql/driver"
)

// The batched save sends its text columns as PostgreSQL array literals. lib/pq's StringArray
// escapes each element with two bytes.Replace calls (copies) and its GenericArray reflects over
// []sql.NullString; with ~100 progress documents full of quotes per batch that was 8% of the
// engine bench's CPU. These write the same literal in one pass, as bytes: lib/pq sends a []byte
// parameter of a non-bytea type as it is, where a string would be copied once more.

// pgTextArray is a text[] parameter.
type pgTextArray []string

func (a pgTextArray) Value() (driver.Value, error) {
	return arrayLiteral(len(a), func(i int) (string, bool) { return a[i], true }), nil
}

// pgNullTextArray is a text[] (or timestamptz[]) parameter whose invalid elements are NULL.
type pgNullTextArray []sql.NullString

func (a pgNullTextArray) Value() (driver.Value, error) {
	return arrayLiteral(len(a), func(i int) (string, bool) { return a[i].String, a[i].Valid }), nil
}

// pgByteTextArray is a text[] parameter of byte slices (encoded documents), none of them NULL.
type pgByteTextArray [][]byte

func (a pgByteTextArray) Value() (driver.Value, error) {
	return arrayLiteral(len(a), func(i int) ([]byte, bool) { return a[i], true }), nil
}

// arrayLiteral writes the literal of n elements; elem gives each one, false for NULL. The buffer
// is sized exactly: progress documents are JSON, full of quotes that escaping doubles, and an
// estimate made it grow (a copy of the whole literal each time).
func arrayLiteral[S string | []byte](n int, elem func(int) (S, bool)) []byte {
	size := 2
	for i := range n {
		if s, ok := elem(i); ok {
			size += 3 + len(s) + escapes(s)
		} else {
			size += 5
		}
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if s, ok := elem(i); ok {
			b = appendArrayElem(b, s)
		} else {
			b = append(b, "NULL"...)
		}
	}
	return append(b, '}')
}

// escapes counts the bytes of s that an array element escapes.
func escapes[S string | []byte](s S) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			n++
		}
	}
	return n
}

// appendArrayElem appends s double-quoted, with backslashes and double quotes escaped.
func appendArrayElem[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', c)
			start = i + 1
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
