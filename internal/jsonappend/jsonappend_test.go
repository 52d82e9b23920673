package jsonappend_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/kyma-project/kyma-environment-broker/internal/jsonappend"
)

// Strings and maps come out byte for byte as json.Marshal writes them, escapes included.
func TestWritesWhatJSONMarshalWrites(t *testing.T) {
	strs := []string{"", "plain", `quote"back\slash`, "a<b>&c", "tab\there\nnew\r\b\f", "\x00\x1f\x7f",
		"ünïcode", "\u2028\u2029", "bad \xff utf-8", "emoji 🙂"}
	for _, s := range strs {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonappend.String(nil, s); string(got) != string(want) {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
	}
	m := map[string]int{}
	for i, s := range strs {
		m[s] = i - 3
	}
	for _, in := range []map[string]int{{}, m} {
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := jsonappend.SortedMap(nil, in, func(b []byte, n int) ([]byte, error) { return strconv.AppendInt(b, int64(n), 10), nil })
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("SortedMap = %s, want %s", got, want)
		}
	}
}
