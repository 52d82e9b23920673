// Package fastjson decodes the JSON documents the broker wrote itself and reads back on every
// claim of an operation: its data and its secrets. encoding/json's reflection decoding them took
// a fifth of the broker's CPU with 100,000 operations in flight (each poll is a claim);
// github.com/goccy/go-json decodes them 3-4x faster with encoding/json's rules (field matching,
// tags, omitted and unknown fields, UnmarshalJSON methods). Request bodies and other input from
// outside stay with encoding/json.
package fastjson

import (
	"encoding/json"
	"reflect"
	"sync"

	gojson "github.com/goccy/go-json"
)

// Unmarshal decodes b into v, a pointer to a zero value, as encoding/json.Unmarshal does. A
// document the fast decoder refuses (or panics on) is decoded again by encoding/json from the
// zero value (not over what the fast decoder left half done), and its answer (and error)
// stands: a difference between the two in what they refuse can cost time, never an operation.
func Unmarshal(b []byte, v any) error { return process.unmarshal(b, v) }

// process guards go-json's decoder cache, which is the process's: so is its guard (the one
// package-level variable here, for that reason).
var process = &decoder{fast: gojson.Unmarshal}

// decoder decodes with go-json, guarding against its unsynchronised decoder cache. go-json
// compiles a type's decoder on its first use and stores it in a shared slot without
// synchronisation; a goroutine reading the slot while another stores it can see half of the
// interface value, a typed nil, and panics (goccy/go-json issues 474 and 495: CI saw a worker
// restarted after kill -9 crash so, its workers all decoding their first claims at once). A
// type's first decode therefore runs alone; later ones read the stored slot lock-free (the
// first's completion happens before them through seen). Should go-json panic anyway, the
// document is decoded by encoding/json: a fault of the fast decoder costs time, never an
// operation or a process.
type decoder struct {
	first sync.Mutex
	seen  sync.Map // reflect.Type -> struct{}: types whose first decode completed
	fast  func([]byte, any) error
}

func (d *decoder) unmarshal(b []byte, v any) error {
	t := reflect.TypeOf(v)
	if _, ok := d.seen.Load(t); !ok {
		d.first.Lock()
		defer d.first.Unlock()
		defer d.seen.Store(t, struct{}{})
	}
	if err := d.tryFast(b, v); err != nil {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv.Elem().SetZero()
		}
		return json.Unmarshal(b, v)
	}
	return nil
}

// panicked is tryFast's error for a panic of the fast decoder.
type panicked struct{ value any }

func (p panicked) Error() string { return "the fast decoder panicked" }

func (d *decoder) tryFast(b []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicked{p}
		}
	}()
	return d.fast(b, v)
}
