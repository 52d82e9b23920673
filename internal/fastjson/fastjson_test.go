package fastjson_test

import (
	"encoding"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/fastjson"
	"github.com/kyma-project/kyma-environment-broker/internal/instance"
	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/operations"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// Every document type fastjson decodes in the product: the processes' data and the secrets.
func TestDecodesLikeEncodingJSON(t *testing.T) {
	t.Run("provisioning", requireDecodesLikeStd[instance.ProvisioningData])
	t.Run("deprovisioning", requireDecodesLikeStd[instance.DeprovisioningData])
	t.Run("update", requireDecodesLikeStd[instance.UpdateData])
	t.Run("kyma upgrade", requireDecodesLikeStd[instance.UpgradeKymaData])
	t.Run("cluster upgrade", requireDecodesLikeStd[instance.UpgradeClusterData])
	t.Run("provisioner operation", requireDecodesLikeStd[operations.Data])
	t.Run("secrets", requireDecodesLikeStd[storage.Secrets])
}

// What encoding/json refuses, fastjson refuses with encoding/json's error.
func TestRefusesWithEncodingJSONsError(t *testing.T) {
	for _, doc := range []string{`{"a":`, `{"a":1}x`, `[1,2]`, `{"a":"\x01"}`, `{"a":"\ud800"}`, ``} {
		var want, got map[string]string
		wantErr := json.Unmarshal([]byte(doc), &want)
		gotErr := fastjson.Unmarshal([]byte(doc), &got)
		if wantErr == nil {
			require.NoError(t, gotErr, doc)
			assert.Equal(t, want, got, doc)
			continue
		}
		require.Error(t, gotErr, doc)
		assert.Equal(t, wantErr.Error(), gotErr.Error(), doc)
	}
}

// A provisioning's and its provisioner operation's data as a finished provisioning left them
// (the simulated backend and the embedded sandbox): what every claim of them decodes.
func BenchmarkDecodeData(b *testing.B) {
	for _, c := range []struct {
		name string
		file string
		new  func() any
	}{
		{"provisioning", "testdata/provisioning.json", func() any { return new(instance.ProvisioningData) }},
		{"provisioner_provision", "testdata/provisioner_provision.json", func() any { return new(operations.Data) }},
	} {
		doc, err := os.ReadFile(c.file)
		require.NoError(b, err)
		b.Run(c.name+"/encoding_json", func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, json.Unmarshal(doc, c.new()))
			}
		})
		b.Run(c.name+"/fastjson", func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, fastjson.Unmarshal(doc, c.new()))
			}
		})
	}
}

// The real documents decode the same with both.
func TestDecodesTheStoredDocumentsLikeEncodingJSON(t *testing.T) {
	for file, v := range map[string][2]any{
		"testdata/provisioning.json":          {new(instance.ProvisioningData), new(instance.ProvisioningData)},
		"testdata/provisioner_provision.json": {new(operations.Data), new(operations.Data)},
	} {
		doc, err := os.ReadFile(file)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(doc, v[0]))
		require.NoError(t, fastjson.Unmarshal(doc, v[1]))
		assert.Equal(t, v[0], v[1], file)
	}
}

// requireDecodesLikeStd fills every field of a T (nested structs, pointers, slices and maps
// included) with values that need escaping, encodes it with encoding/json, and requires
// fastjson to decode it, and the same document with every field null, exactly as
// encoding/json does.
func requireDecodesLikeStd[T any](t *testing.T) {
	t.Helper()
	var v T
	fill(reflect.ValueOf(&v).Elem(), 0)
	doc, err := json.Marshal(v)
	require.NoError(t, err)
	requireSame[T](t, doc)

	// Every field null, and unknown fields beside them.
	var fields map[string]json.RawMessage
	if reflect.TypeFor[T]().Kind() == reflect.Struct && json.Unmarshal(doc, &fields) == nil {
		nulls := map[string]json.RawMessage{"an_unknown_field": json.RawMessage(`{"x":[1,"y",null]}`)}
		for k := range fields {
			nulls[k] = json.RawMessage("null")
		}
		doc, err = json.Marshal(nulls)
		require.NoError(t, err)
		requireSame[T](t, doc)
	}
}

func requireSame[T any](t *testing.T, doc []byte) {
	t.Helper()
	var want, got T
	require.NoError(t, json.Unmarshal(doc, &want))
	require.NoError(t, fastjson.Unmarshal(doc, &got))
	require.Equal(t, want, got, "decoding %s", doc)
}

const odd = "quote\" back\\ <tag> & \n\t \u2028 é 日本"

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t != reflect.TypeFor[time.Time]() && (pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler))
}

// fill sets v to a value with every field set; depth bounds recursive types. A type that
// decodes itself (UnmarshalJSON, UnmarshalText) is left as it is: both decoders call its method,
// and it may refuse made-up values.
func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	if decodesItself(v.Type()) || (v.Kind() == reflect.Pointer && decodesItself(v.Type().Elem())) {
		return
	}
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 26, 6, 30, 0, 123456789, time.FixedZone("x", 5400))))
		return
	}
	if v.Type() == reflect.TypeOf(json.RawMessage{}) {
		v.SetBytes([]byte(`{"raw":[1,2.5,"` + "s" + `",{"n":null}]}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(odd + fmt.Sprint(depth))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-7 - int64(depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7 + uint64(depth))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(2.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := 0; i < 2; i++ {
			k := reflect.New(v.Type().Key()).Elem()
			fill(k, depth+1)
			if k.Kind() == reflect.String {
				k.SetString(fmt.Sprint(k.String(), i))
			}
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"n": 2.5, "s": odd, "l": []any{true, nil, "x"}}))
	}
}
