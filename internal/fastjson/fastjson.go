// Package fastjson decodes the JSON documents the broker wrote itself and reads back on every
// claim of an operation: its data and its secrets. encoding/json's reflection decoding them was
// a large share of the broker's CPU with many operations in flight (each poll is a claim);
// github.com/goccy/go-json decodes them several times faster with encoding/json's rules (field matching,
// tags, omitted and unknown fields, UnmarshalJSON methods). Request bodies and other input from
// outside stay with encoding/json.
package fastjson

import (
	"encoding/json"
	"reflect"

	gojson "github.com/goccy/go-json"
)

// Unmarshal decodes b into v, a pointer to a zero value, as encoding/json.Unmarshal does. A
// document the fast decoder refuses is decoded again by encoding/json from the zero value (not
// over what the fast decoder left half done), and its answer (and error) stands: a difference
// between the two in what they refuse can cost time, never an operation.
//
// go-json before v0.12.0 stored a type's compiled decoder in its cache without synchronisation,
// and concurrent first decodes of a type could read a torn slot and panic (goccy/go-json issues
// 474 and 495); this package serialised first decodes for that. v0.12.0 publishes the cache
// entries atomically (testdata/go-json-v0.12.0.json), so decodes run unserialised.
func Unmarshal(b []byte, v any) error {
	if err := gojson.Unmarshal(b, v); err != nil {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv.Elem().SetZero()
		}
		return json.Unmarshal(b, v)
	}
	return nil
}
