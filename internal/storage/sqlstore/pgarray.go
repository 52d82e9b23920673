package sqlstore

import (
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
)

// The batched statements send their columns as PostgreSQL arrays. Text and bytea arrays go in
// PostgreSQL's binary array format (the sessions set binary_parameters, under which lib/pq sends
// a []byte parameter as binary): the server copies each element as it is, where a text literal
// had every quote of the JSON documents escaped here and parsed back by array_in there (and
// hex for bytea). Times stay text literals, sent as a
// string, which lib/pq keeps in text format: PostgreSQL parses them as it parses a single time.

// Element type OIDs of the binary arrays (pg_type).
const (
	oidBytea = 17
	oidText  = 25
)

// pgTextArray is a text[] parameter.
type pgTextArray []string

func (a pgTextArray) Value() (driver.Value, error) {
	return binaryArray(oidText, len(a), func(i int) (string, bool) { return a[i], true }), nil
}

// pgNullTextArray is a text[] parameter whose invalid elements are NULL.
type pgNullTextArray []sql.NullString

func (a pgNullTextArray) Value() (driver.Value, error) {
	return binaryArray(oidText, len(a), func(i int) (string, bool) { return a[i].String, a[i].Valid }), nil
}

// pgByteTextArray is a text[] parameter of byte slices (encoded documents), none of them NULL.
type pgByteTextArray [][]byte

func (a pgByteTextArray) Value() (driver.Value, error) {
	return binaryArray(oidText, len(a), func(i int) ([]byte, bool) { return a[i], true }), nil
}

// pgByteaArray is a bytea[] parameter; a nil element is NULL.
type pgByteaArray [][]byte

func (a pgByteaArray) Value() (driver.Value, error) {
	return binaryArray(oidBytea, len(a), func(i int) ([]byte, bool) { return a[i], a[i] != nil }), nil
}

// pgTimeArray is a timestamptz[] parameter of RFC 3339 texts whose invalid elements are NULL.
type pgTimeArray []sql.NullString

func (a pgTimeArray) Value() (driver.Value, error) {
	return string(arrayLiteral(len(a), func(i int) (string, bool) { return a[i].String, a[i].Valid })), nil
}

// binaryArray writes a one-dimensional array of n elements of type oid in the format of
// PostgreSQL's array_recv; elem gives each one, false for NULL.
func binaryArray[S string | []byte](oid uint32, n int, elem func(int) (S, bool)) []byte {
	if n == 0 {
		// No dimensions: the empty array.
		return binary.BigEndian.AppendUint32(make([]byte, 8, 12), oid)
	}
	size, nulls := 20+4*n, uint32(0)
	for i := range n {
		if s, ok := elem(i); ok {
			size += len(s)
		} else {
			nulls = 1
		}
	}
	b := make([]byte, 0, size)
	for _, v := range [...]uint32{1, nulls, oid, uint32(n), 1} { // dimensions, has NULLs, type, length, lower bound
		b = binary.BigEndian.AppendUint32(b, v)
	}
	for i := range n {
		s, ok := elem(i)
		if !ok {
			b = binary.BigEndian.AppendUint32(b, ^uint32(0)) // -1: NULL
			continue
		}
		b = append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
	}
	return b
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

// TextArray and ByteTextArray are text[] parameters (binary, as pgTextArray and pgByteTextArray)
// for the components that keep tables of their own in a store's PostgreSQL database.
type (
	TextArray     = pgTextArray
	ByteTextArray = pgByteTextArray
)
